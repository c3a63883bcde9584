#!/bin/bash
# vLLM for 12.1a against the builder's PyTorch (no build isolation: the isolated build would
# fetch another torch), with CUDA 13.0's nvcc, which the build checks first.
set -euo pipefail
export PATH="$CUDA_HOME/bin:$PATH"
[[ "$(nvcc --version)" == *"release 13.0"* ]] || { echo "nvcc is not CUDA 13.0" >&2; exit 1; }
python3 use_existing_torch.py
pip wheel --no-deps --no-build-isolation -w "$ENGINEBUILD_OUTPUTS" .
