#!/bin/bash
# The vLLM wheel against the base's PyTorch (no build isolation), as the recipe's
# `pip install --no-build-isolation --no-deps .` compiles it.
set -euo pipefail
pip wheel --no-build-isolation --no-deps -w "$ENGINEBUILD_OUTPUTS" .
