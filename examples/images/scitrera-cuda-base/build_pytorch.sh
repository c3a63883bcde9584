#!/bin/bash
# A PyTorch wheel for $TORCH_CUDA_ARCH_LIST against the NCCL this image builds.
set -euo pipefail
export NCCL_ROOT="$ENGINEBUILD_DEP_NCCL" USE_CUDA=1 USE_CUDNN=1 USE_NCCL=1 USE_DISTRIBUTED=1 BUILD_TEST=0
pip wheel --no-build-isolation --no-deps -w "$ENGINEBUILD_OUTPUTS" .
