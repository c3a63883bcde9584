#!/bin/bash
# Builds a vLLM wheel from its pinned (and patched) source against the base image's PyTorch,
# offline: vendored sources arrive through *_SRC_DIR variables, nothing is downloaded.
set -euo pipefail
python3 use_existing_torch.py
export VLLM_TARGET_DEVICE=cuda CCACHE_DIR=/root/.cache/ccache
echo "building vLLM for TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:?}"
python3 -m pip wheel --no-index --no-deps --no-build-isolation -w "$ENGINEBUILD_OUTPUTS" -v .
