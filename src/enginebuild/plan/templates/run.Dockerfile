# enginebuild: {{ what }} ({{ platform }}); the layers written here are normalised afterwards
FROM {{ parent }}
ENV SOURCE_DATE_EPOCH={{ epoch }}{% for key, value in env %} {{ key }}={{ value|dq }}{% endfor %}
{% for command in commands -%}
{% if command.run is string %}RUN{{ command.mounts }} {{ command.run|shline }}{% else %}RUN{{ command.mounts }} {{ command.run|json }}{% endif %}
{% endfor -%}
