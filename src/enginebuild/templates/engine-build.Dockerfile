# enginebuild stage: build {{ engine }} in {{ srcdir }}
FROM {{ parent }}
RUN --mount=type=bind,source=build.sh,target=/tmp/enginebuild-build.sh{% for dir in cache %} --mount=type=cache,target={{ dir }}{% endfor %}{% for id in secrets %} --mount=type=secret,id={{ id }}{% endfor %} cd {{ srcdir|sh }} &&{% for name, value in args %} {{ name }}={{ value|sh }}{% endfor %} sh /tmp/enginebuild-build.sh
