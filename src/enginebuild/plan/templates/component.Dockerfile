# enginebuild component {{ name }} for {{ platform }}: built here, only its outputs are kept
FROM {{ parent }}
ENV SOURCE_DATE_EPOCH={{ epoch }} PYTHONHASHSEED=0 ENGINEBUILD_COMPONENT={{ name|dq }} ENGINEBUILD_OUTPUTS={{ outputs|dq }}{% for key, value in env %} {{ key }}={{ value|dq }}{% endfor %}
{% if source -%}
ADD source.tar {{ workdir }}/
{% endif -%}
{% for item in sources -%}
ADD sources/{{ item }}.tar /opt/enginebuild/sources/{{ item }}/
{% endfor -%}
{% for item in deps -%}
ADD deps/{{ item }}.tar /opt/enginebuild/deps/{{ item }}/
{% endfor -%}
WORKDIR {{ workdir }}
{% if cache_restore -%}
RUN{{ seed_mounts }} {{ ["/bin/sh", "-c", cache_restore]|json }}
{% endif -%}
RUN --mount=type=bind,source=build.sh,target=/opt/enginebuild/build.sh{{ mounts }} ["/opt/enginebuild/build.sh"]
{% for step in steps -%}
{% if step.run is string %}RUN{{ step.mounts }} {{ step.run|shline }}{% else %}RUN{{ step.mounts }} {{ step.run|json }}{% endif %}
{% endfor -%}
{% if editable -%}
RUN --mount=type=bind,source=editable_wheel.py,target=/opt/enginebuild/editable_wheel.py{{ mounts }} {{ editable|json }}
{% endif -%}
{% if cache_save -%}
RUN{{ cache_mounts }} {{ ["/bin/sh", "-c", cache_save]|json }}
{% endif -%}
