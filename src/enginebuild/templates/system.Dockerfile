# enginebuild stage: system packages ({{ packages|length }} pinned .debs)
FROM {{ parent }}
{% if install == "extract" -%}
ADD sysroot.tar /
{% else -%}
RUN --mount=type=bind,source=debs,target=/tmp/enginebuild-debs dpkg -i /tmp/enginebuild-debs/*.deb
{% endif -%}
{% for command in run -%}
{% if command is string %}RUN {{ command|shline }}{% else %}RUN {{ command|json }}{% endif %}
{% endfor -%}
