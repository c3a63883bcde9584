# enginebuild stage: {{ engine }} source ({{ pin }}){% if vendor %} and {{ vendor|length }} vendored source(s){% endif %}
FROM {{ parent }}
ADD {{ archive }} {{ dest }}/
{% for item in vendor -%}
ADD {{ item.archive }} {{ dest }}/vendor/
{% endfor -%}
