#!/bin/bash
# The vLLM wheel against the builder's PyTorch (use_existing_torch.py drops torch from its
# requirement files), as `pip install -e .` would compile it.
set -euo pipefail
python3 use_existing_torch.py
pip wheel --no-build-isolation --no-deps -w "$ENGINEBUILD_OUTPUTS" .
