#!/bin/bash
# Builds vLLM's compiled part for GB10 from its pinned (and patched) source against the base
# image's PyTorch, offline: vendored sources arrive through *_SRC_DIR variables, nothing is
# downloaded. The build sees only the component's declared inputs; the wheel it makes is
# what the package component takes its compiled extensions from.
set -euo pipefail
python3 use_existing_torch.py
export VLLM_TARGET_DEVICE=cuda CCACHE_DIR=/root/.cache/ccache
echo "building vLLM's kernels for TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:?}"
python3 -m pip wheel --no-index --no-deps --no-build-isolation -w "$ENGINEBUILD_OUTPUTS" -v .
