#!/bin/sh
# Builds llama-server from the pinned llama.cpp source for GB10 (sm_121), linking the
# CUDA driver stub so the build needs no GPU, and installs it (with its shared libraries)
# into the component's output prefix. CMAKE_CUDA_ARCHITECTURES comes from the spec.
set -eu
stubs=/usr/local/cuda/lib64/stubs
cmake -S . -B build -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES:?set in the build args of the component}" \
    -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DCMAKE_INSTALL_RPATH="\$ORIGIN/../lib" \
    -DCMAKE_EXE_LINKER_FLAGS="-L$stubs -Wl,-rpath-link,$stubs" \
    -DCMAKE_SHARED_LINKER_FLAGS="-L$stubs -Wl,-rpath-link,$stubs"
cmake --build build --target llama-server -j "${MAX_JOBS:-8}"
cmake --install build --prefix "$ENGINEBUILD_OUTPUTS"
"$ENGINEBUILD_OUTPUTS/bin/llama-server" --version || true
