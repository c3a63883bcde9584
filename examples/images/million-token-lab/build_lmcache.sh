#!/bin/bash
# LMCache's wheel with its CUDA kernels for $TORCH_CUDA_ARCH_LIST, against the builder's PyTorch.
set -euo pipefail
pip wheel --no-build-isolation --no-deps -w "$ENGINEBUILD_OUTPUTS" .
