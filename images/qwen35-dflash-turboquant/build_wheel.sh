#!/bin/sh
# Builds the (patched) plugin into a wheel with the base's own build tools, offline.
set -eu
python3 -m pip wheel --no-index --no-deps --no-build-isolation -w "$ENGINEBUILD_OUTPUTS" .
