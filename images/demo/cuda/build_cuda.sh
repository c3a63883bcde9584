#!/bin/sh
# Builds the demo's CUDA kernel library with the pinned nvcc (NVIDIA's PyPI wheels, installed
# in this builder at $NVIDIA_WHEELS) for the archs the image declares: enginebuild passes the
# list as ENGINEBUILD_CUDA_ARCHS and nvcc's -gencode flags as ENGINEBUILD_NVCC_GENCODE.
#
# Reproducible output: by default nvcc names its intermediate files after its process id and
# embeds that name in the library; -objtemp names them after the object file instead, and
# -frandom-seed fixes the symbol names it would otherwise draw at random.
set -eu
cuda=${NVIDIA_WHEELS:?}/nvidia/cu13
: "${ENGINEBUILD_NVCC_GENCODE:?the image declares no cuda-archs}"
echo "nvcc $("$cuda/bin/nvcc" --version | tail -n 2 | head -n 1) for ${ENGINEBUILD_CUDA_ARCHS}"
mkdir -p build /opt/enginebuild/lib
# GENCODE holds several flags: word splitting is wanted.
# shellcheck disable=SC2086
"$cuda/bin/nvcc" -c -objtemp -frandom-seed=rmsnorm.cu -Xcompiler -fPIC,-ffile-prefix-map="$PWD"=. \
    $ENGINEBUILD_NVCC_GENCODE -o build/rmsnorm.o rmsnorm.cu
# shellcheck disable=SC2086
"$cuda/bin/nvcc" -shared -cudart static $ENGINEBUILD_NVCC_GENCODE -o /opt/enginebuild/lib/libdemo_cuda.so \
    build/rmsnorm.o
echo "built /opt/enginebuild/lib/libdemo_cuda.so"
