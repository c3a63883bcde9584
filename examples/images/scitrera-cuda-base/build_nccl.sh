#!/bin/bash
# NCCL's libraries and headers for $NVCC_GENCODE, installed into the output prefix.
set -euo pipefail
make -j"$BUILD_JOBS" src.build NVCC_GENCODE="$NVCC_GENCODE"
make install PREFIX="$ENGINEBUILD_OUTPUTS"
