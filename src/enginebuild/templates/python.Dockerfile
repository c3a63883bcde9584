# enginebuild stage: Python requirements ({{ count }} pinned files, installed offline)
FROM {{ parent }}
RUN --mount=type=bind,source=python,target=/tmp/enginebuild-python {{ pip }} install --no-index --no-deps --no-build-isolation --require-hashes --find-links /tmp/enginebuild-python -r /tmp/enginebuild-python/requirements.txt
