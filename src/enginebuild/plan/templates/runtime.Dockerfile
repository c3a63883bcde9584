# The runtime image of {{ image }} ({{ platform }}) as the Dockerfile it is equivalent to.
# Layers marked "enginebuild" are written directly by enginebuild (deterministic tars);
# "RUN" layers are built by BuildKit and normalised; see `render --out` for their contexts.
FROM {{ base }}
{% for layer in layers -%}
{{ layer }}
{% endfor -%}
{% for line in settings -%}
{{ line }}
{% endfor -%}
