#!/bin/sh
# Builds the demo's CUDA kernel library with the pinned nvcc (NVIDIA's PyPI wheels, installed
# in this builder at $NVIDIA_WHEELS) for the archs the image declares: enginebuild passes the
# list as ENGINEBUILD_CUDA_ARCHS and nvcc's -gencode flags as ENGINEBUILD_NVCC_GENCODE.
set -eu
cuda=${NVIDIA_WHEELS:?}/nvidia/cu13
: "${ENGINEBUILD_NVCC_GENCODE:?the image declares no cuda-archs}"
echo "nvcc $("$cuda/bin/nvcc" --version | tail -n 2 | head -n 1) for ${ENGINEBUILD_CUDA_ARCHS}"
mkdir -p /opt/enginebuild/lib
# GENCODE holds several flags: word splitting is wanted. The source path is mapped away so
# the library does not depend on where it was built.
# shellcheck disable=SC2086
"$cuda/bin/nvcc" -shared -Xcompiler -fPIC,-ffile-prefix-map="$PWD"=. -cudart static \
    $ENGINEBUILD_NVCC_GENCODE -o /opt/enginebuild/lib/libdemo_cuda.so rmsnorm.cu
echo "built /opt/enginebuild/lib/libdemo_cuda.so"
