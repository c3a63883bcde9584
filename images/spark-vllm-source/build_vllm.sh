#!/bin/sh
# Builds the vLLM wheel from its pinned (and patched) source around the compiled extensions of
# the kernels component's wheel (VLLM_USE_PRECOMPILED): no compiler runs, so a patch of
# Python files costs the time of packaging, not of compiling every CUDA file. The kernels
# wheel is the one vllm-kernels built for 12.1a, or the release's when that component is
# taken from a release (`release:`). POSIX sh: it runs on NVIDIA's base and on busybox alike.
set -eu
python3 use_existing_torch.py
kernels=""
for wheel in "$ENGINEBUILD_DEP_VLLM_KERNELS"/*.whl; do
    kernels="$wheel"
done
if [ ! -f "$kernels" ]; then
    echo "no kernels wheel in $ENGINEBUILD_DEP_VLLM_KERNELS" >&2
    exit 1
fi
export VLLM_TARGET_DEVICE=cuda VLLM_USE_PRECOMPILED=1 VLLM_PRECOMPILED_WHEEL_LOCATION="$kernels"
echo "packaging vLLM around ${kernels##*/}"
python3 -m pip wheel --no-index --no-deps --no-build-isolation -w "$ENGINEBUILD_OUTPUTS" -v .
