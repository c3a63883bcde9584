#!/bin/sh
# Builds vLLM from its pinned (and patched) source against the base image's PyTorch,
# offline: vendored sources arrive through *_SRC_DIR variables, nothing is downloaded.
set -eu
pip="python3 -m pip"
$pip uninstall -y vllm || true
python3 use_existing_torch.py
export VLLM_TARGET_DEVICE=cuda
export CCACHE_DIR=/root/.cache/ccache
echo "building vLLM for TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:?} FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:?}"
$pip install --no-index --no-deps --no-build-isolation -v .
python3 -c "import vllm; print('vllm', vllm.__version__)"
