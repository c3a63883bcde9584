# enginebuild stage: files, scripts and configuration of {{ image }}
FROM {{ parent }}
{% for layer in layers -%}
COPY files/{{ layer }}/ /
{% endfor -%}
{% if env -%}
ENV{% for name, value in env %} {{ name }}={{ value|dq }}{% endfor %}
{% endif -%}
{% if labels -%}
LABEL{% for name, value in labels %} {{ name|dq }}={{ value|dq }}{% endfor %}
{% endif -%}
{% for port in expose -%}
EXPOSE {{ port }}
{% endfor -%}
{% if workdir -%}
WORKDIR {{ workdir }}
{% endif -%}
{% if user -%}
USER {{ user }}
{% endif -%}
{% if entrypoint is not none -%}
ENTRYPOINT {{ entrypoint|json }}
{% endif -%}
{% if cmd is not none -%}
CMD {{ cmd|json }}
{% endif -%}
