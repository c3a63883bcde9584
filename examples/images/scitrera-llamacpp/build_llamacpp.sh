#!/bin/bash
# llama.cpp with CUDA for $CUDA_ARCHITECTURES through ccache, installed into the output prefix.
set -euo pipefail
export CCACHE_DIR=/root/.ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
cmake -B build -G Ninja -DGGML_CUDA=ON -DGGML_RPC=ON -DGGML_NATIVE=OFF -DLLAMA_CURL=ON -DLLAMA_OPENSSL=ON \
    -DGGML_CUDA_FA_ALL_QUANTS=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHITECTURES"
cmake --build build --config Release -j"$BUILD_JOBS"
cmake --install build --prefix "$ENGINEBUILD_OUTPUTS"
