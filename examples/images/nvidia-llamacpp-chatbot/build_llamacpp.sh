#!/bin/bash
# llama-server and the ggml backends it loads (GGML_BACKEND_DL), side by side in the prefix,
# as the runtime's /app expects them.
set -euo pipefail
cmake -B build -DGGML_CUDA=ON -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DLLAMA_BUILD_TESTS=OFF \
    -DGGML_CUDA_ENABLE_UNIFIED_MEMORY="$GGML_CUDA_ENABLE_UNIFIED_MEMORY" \
    -DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES" \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined .
cmake --build build --config Release -j"$(nproc)" --target llama-server
mkdir -p "$ENGINEBUILD_OUTPUTS"
find build -name '*.so' -exec cp {} "$ENGINEBUILD_OUTPUTS"/ \;
cp build/bin/llama-server "$ENGINEBUILD_OUTPUTS"/
