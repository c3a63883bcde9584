# enginebuild stage: patch stack of {{ engine }} ({{ names|length }} patches, applied to {{ target }})
FROM {{ parent }}
RUN --mount=type=bind,source=patches,target=/tmp/enginebuild-patches sh /tmp/enginebuild-patches/apply_patches.sh {{ target|sh }}{% for name in names %} {{ name|sh }}{% endfor %}
