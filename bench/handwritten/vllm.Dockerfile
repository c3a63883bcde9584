# vllm-pypi (linux/amd64) as a careful recipe writes it: the same pinned requirements with
# their hashes, installed by pip over the same base (system.tar: the runtime's Debian system
# layers, exported from enginebuild's chain image), pip run from its own wheel (Debian's
# python3 has none; `--ignore-installed`, or the pip it runs from would count as the closure's
# pip already installed and the image would lack it), the launch scripts copied last. ca.pem
# is the build machine's CA bundle (the PyPI it reaches may sit behind a TLS-inspecting proxy).
# The benchmark builds it with the docker CLI and BuildKit beside enginebuild.
FROM scratch
ADD system.tar /
ARG SALT=0
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=requirements.txt,target=/tmp/requirements.txt \
    --mount=type=bind,source=pip.whl,target=/tmp/pip.whl \
    --mount=type=bind,source=ca.pem,target=/tmp/ca.pem \
    echo "build $SALT" \
    && python3 /tmp/pip.whl/pip install --cert /tmp/ca.pem --break-system-packages --no-deps --require-hashes --no-compile --ignore-installed \
       -r /tmp/requirements.txt
COPY launch_vllm.sh /opt/enginebuild/bin/launch_server.sh
COPY launch_vllm_ar.sh /opt/enginebuild/bin/launch_server_ar.sh
COPY wait_for_server.sh bench.sh /opt/enginebuild/bin/
ENV PORT=8000 MAX_MODEL_LEN=65536 MAX_NUM_SEQS=16 MAX_NUM_BATCHED_TOKENS=32768 GPU_MEMORY_UTILIZATION=0.85 \
    ATTENTION_BACKEND=flash_attn LOAD_FORMAT=fastsafetensors DFLASH_NUM_SPEC_TOKENS=15 HOME=/root
EXPOSE 8000
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/enginebuild/bin/launch_server.sh"]
