# The runtime image of {{ image }} ({{ platform }}) as the Dockerfile it is equivalent to.
# Layers marked "enginebuild" are written directly by enginebuild (deterministic tars);
# "RUN" layers are built by BuildKit and normalised; see `render --out` for their contexts.
FROM {{ base }}
{% for layer in layers -%}
{{ layer }}
{% endfor -%}
{% if env_note -%}
# {{ env_note }}
{% endif -%}
{% if env -%}
ENV{% for name, value in env %} {{ name }}={{ value|dq }}{% endfor %}
{% endif -%}
{% if labels -%}
LABEL{% for name, value in labels %} {{ name|dq }}={{ value|dq }}{% endfor %}
{% endif -%}
{% for name in labels_removed -%}
# label {{ name }} removed by enginebuild: a Dockerfile cannot remove a base's label (LABEL sets it)
{% endfor -%}
{% for port in expose -%}
EXPOSE {{ port }}
{% endfor -%}
{% if workdir -%}
WORKDIR {{ workdir }}
{% endif -%}
{% if user -%}
USER {{ user }}
{% endif -%}
{% if shell -%}
SHELL {{ shell|json }}
{% endif -%}
{% if stopsignal -%}
STOPSIGNAL {{ stopsignal }}
{% endif -%}
{% if healthcheck and healthcheck.test is none -%}
HEALTHCHECK NONE
{% elif healthcheck -%}
HEALTHCHECK{{ healthcheck.options }} CMD {{ healthcheck.test|json }}
{% endif -%}
{% if entrypoint is not none -%}
ENTRYPOINT {{ entrypoint|json }}
{% endif -%}
{% if cmd is not none -%}
CMD {{ cmd|json }}
{% endif -%}
