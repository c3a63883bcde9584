#!/bin/sh
# Builds the vLLM wheel from its pinned (and patched) source around the compiled extensions of
# the kernels component's wheel (VLLM_USE_PRECOMPILED): no compiler runs, so a patch of
# Python files costs the time of packaging, not of compiling every CUDA file. The kernels
# wheel is the one vllm-kernels built for 12.1a, or the release's when that component is
# taken from a release (`release:`). POSIX sh: it runs on NVIDIA's base and on busybox alike.
set -eu
# keep the environment's PyTorch: the script sits at the top of the tree up to 0.22, in tools/ later
for script in use_existing_torch.py tools/use_existing_torch.py; do
    if [ -f "$script" ]; then
        python3 "$script"
        break
    fi
done
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
