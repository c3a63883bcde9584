# qwen36-dflash-pypi (linux/amd64) as a careful recipe writes it: the runtime's Debian system
# layers (system.tar, exported from enginebuild's chain image), the same pinned closure
# installed with `pip install --require-hashes --no-deps` (pip run from its own wheel), then
# vLLM's sdist patched with the committed stack and packaged around the release wheel's
# compiled extensions (VLLM_USE_PRECOMPILED), sdist, wheel and patches bound in, not copied,
# so an edit of a patch reruns only the last step. The launch scripts are copied last.
FROM scratch
ADD system.tar /
RUN --mount=type=cache,target=/root/.cache/pip \
    --mount=type=bind,source=requirements.txt,target=/tmp/requirements.txt \
    --mount=type=bind,source=pip.whl,target=/tmp/pip.whl \
    --mount=type=bind,source=ca.pem,target=/tmp/ca.pem \
    python3 /tmp/pip.whl/pip install --cert /tmp/ca.pem --break-system-packages --no-deps --require-hashes \
       --no-compile --ignore-installed -r /tmp/requirements.txt
RUN --mount=type=bind,source=vllm,target=/tmp/in \
    mkdir -p /tmp/build && tar -xzf /tmp/in/vllm-0.21.0.tar.gz -C /tmp/build && cd /tmp/build/vllm-0.21.0 \
    && for p in /tmp/in/patches/*.patch; do patch -p1 < "$p"; done \
    && python3 use_existing_torch.py \
    && VLLM_TARGET_DEVICE=cuda VLLM_USE_PRECOMPILED=1 VLLM_PRECOMPILED_WHEEL_LOCATION=/tmp/in/release/$(ls /tmp/in/release) \
       python3 -m pip install --break-system-packages --no-index --no-deps --no-build-isolation --no-compile . \
    && cd / && rm -rf /tmp/build /root/.cache/pip
COPY launch_vllm.sh /opt/enginebuild/bin/launch_server.sh
COPY launch_vllm_ar.sh /opt/enginebuild/bin/launch_server_ar.sh
COPY wait_for_server.sh bench.sh /opt/enginebuild/bin/
ENV PORT=8000 MAX_MODEL_LEN=65536 MAX_NUM_SEQS=16 MAX_NUM_BATCHED_TOKENS=32768 GPU_MEMORY_UTILIZATION=0.85 \
    ATTENTION_BACKEND=flash_attn LOAD_FORMAT=fastsafetensors DFLASH_NUM_SPEC_TOKENS=15 DFLASH_DRAFTER=/models/drafter \
    HOME=/root
EXPOSE 8000
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/enginebuild/bin/launch_server.sh"]
