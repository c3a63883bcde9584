#!/bin/bash
# Builds the vLLM wheel from its pinned (and patched) source around the compiled extensions of
# the kernels component's wheel (VLLM_USE_PRECOMPILED): no compiler runs, so a patch of
# Python files costs the time of packaging, not of compiling every CUDA file.
set -euo pipefail
python3 use_existing_torch.py
kernels=("$ENGINEBUILD_DEP_VLLM_KERNELS"/*.whl)
export VLLM_TARGET_DEVICE=cuda VLLM_USE_PRECOMPILED=1 VLLM_PRECOMPILED_WHEEL_LOCATION="${kernels[0]:?no kernels wheel}"
echo "packaging vLLM around ${VLLM_PRECOMPILED_WHEEL_LOCATION##*/}"
python3 -m pip wheel --no-index --no-deps --no-build-isolation -w "$ENGINEBUILD_OUTPUTS" -v .
