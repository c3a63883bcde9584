# enginebuild stage: plugins ({{ plugins|map(attribute="name")|join(", ") }})
FROM {{ parent }}
{% for plugin in plugins -%}
ADD {{ plugin.archive }} /opt/enginebuild/plugins/
{% if plugin.patches -%}
RUN --mount=type=bind,source=plugin-{{ plugin.name }},target=/tmp/enginebuild-patches sh /tmp/enginebuild-patches/apply_patches.sh {{ plugin.srcdir|sh }}{% for name in plugin.patches %} {{ name|sh }}{% endfor %}
{% endif -%}
RUN cd {{ plugin.srcdir|sh }} && {{ pip }} install --no-index --no-deps --no-build-isolation .
{% if plugin.has_files -%}
COPY plugin-files-{{ plugin.name }}/ /
{% endif -%}
{% endfor -%}
