#!/bin/bash
# nccl-tests against the NCCL this image builds, with MPI; the binaries into the output folder.
set -euo pipefail
make -j"$BUILD_JOBS" MPI=1 NCCL_HOME="$ENGINEBUILD_DEP_NCCL" CUDA_HOME=/usr/local/cuda MPI_HOME=/usr/lib/aarch64-linux-gnu/openmpi
mkdir -p "$ENGINEBUILD_OUTPUTS" && cp build/* "$ENGINEBUILD_OUTPUTS"/
