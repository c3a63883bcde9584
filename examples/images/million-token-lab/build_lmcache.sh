#!/bin/bash
# Nothing to do before the editable build: enginebuild asks LMCache's build backend for its
# editable wheel right after this script, against the builder's PyTorch (no isolation), which
# compiles the CUDA kernels for $TORCH_CUDA_ARCH_LIST into the tree at /app/LMCache.
set -euo pipefail
python3 -c "import torch; print('building against torch', torch.__version__)"
