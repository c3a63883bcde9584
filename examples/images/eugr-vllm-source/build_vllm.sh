#!/bin/bash
# The vLLM wheel for 12.1a against the builder's PyTorch; FlashInfer and Triton come from
# the runtime's own requirements, so vLLM's requirement files stop naming them.
set -euo pipefail
export PATH="/usr/lib/ccache:$PATH"
python3 use_existing_torch.py
sed -i '/flashinfer/d' requirements/cuda.txt
pip wheel --no-build-isolation --no-deps -w "$ENGINEBUILD_OUTPUTS" .
