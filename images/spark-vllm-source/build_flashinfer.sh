#!/bin/bash
# Builds FlashInfer for GB10: the flashinfer-python wheel and, from the same source, the
# flashinfer-jit-cache wheel with its ahead-of-time kernels for FLASHINFER_CUDA_ARCH_LIST
# (the two must come from one release).
set -euo pipefail
export CCACHE_DIR=/root/.cache/ccache
echo "building FlashInfer for FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:?}"
python3 -m pip wheel --no-index --no-deps --no-build-isolation -w "$ENGINEBUILD_OUTPUTS" .
cd flashinfer-jit-cache
python3 -m pip wheel --no-index --no-deps --no-build-isolation -w "$ENGINEBUILD_OUTPUTS" .
