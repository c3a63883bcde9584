#!/bin/bash
# Triton and triton_kernels wheels, built against the builder's PyTorch, no build isolation.
set -euo pipefail
export PATH="/usr/lib/ccache:$PATH"
pip wheel --no-build-isolation --no-deps -w "$ENGINEBUILD_OUTPUTS" .
pip wheel --no-build-isolation --no-deps -w "$ENGINEBUILD_OUTPUTS" python/triton_kernels
