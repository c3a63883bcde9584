#!/bin/bash
# Before the tree is rewritten and compiled: drop torch from vLLM's requirement files so that
# the builder's PyTorch is used (the recipe's `python3 use_existing_torch.py`). enginebuild then
# runs the steps and builds the editable wheel, which compiles the kernels in /app/vllm.
set -euo pipefail
python3 use_existing_torch.py
