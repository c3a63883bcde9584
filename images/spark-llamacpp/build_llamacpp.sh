#!/bin/sh
# Builds llama-server from the pinned llama.cpp source and copies it, with exactly the shared
# libraries of the llama.cpp tree it links, into the component's output prefix (bin/, lib/;
# the binary finds them through its RPATH $ORIGIN/../lib).
#
#   CMAKE_CUDA_ARCHITECTURES  set: the CUDA backend for those architectures (121 on GB10),
#                             linking the CUDA driver stub so the build needs no GPU;
#                             empty: the CPU backend only
#   CMAKE_BUILD_TYPE          Release (default); None compiles without optimisation flags
#                             (about half the compile time, for tests of the recipe itself)
#   GGML_NATIVE               OFF (default): portable code that runs on any machine of the
#                             platform; ON tunes for the build machine's CPU
#   LLAMA_SOURCE_DIR          where llama.cpp sits in the source (default: its top)
#   GGML_RPC                  ON: also the RPC backend and its server, rpc-server or ggml-rpc-server (a node of a model spread
#                             over several machines: `serve`); default OFF
#   MAX_JOBS                  parallel compile jobs (default 8)
# The compiler cache (ccache, found by llama.cpp's CMake) lives in the component's cache mount.
set -eu
src=${LLAMA_SOURCE_DIR:-.}
[ -f "$src/CMakeLists.txt" ] || { echo "build_llamacpp.sh: no CMakeLists.txt in $src" >&2; exit 2; }
set -- -S "$src" -B build -G Ninja \
    -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
    -DGGML_NATIVE="${GGML_NATIVE:-OFF}" \
    -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
    -DCMAKE_INSTALL_RPATH="\$ORIGIN/../lib"
if [ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ]; then
    stubs=/usr/local/cuda/lib64/stubs
    set -- "$@" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$CMAKE_CUDA_ARCHITECTURES" \
        -DCMAKE_EXE_LINKER_FLAGS="-L$stubs -Wl,-rpath-link,$stubs" \
        -DCMAKE_SHARED_LINKER_FLAGS="-L$stubs -Wl,-rpath-link,$stubs"
fi
targets=llama-server
if [ "${GGML_RPC:-OFF}" = ON ]; then
    set -- "$@" -DGGML_RPC=ON
    # the server's target is rpc-server, or ggml-rpc-server in newer trees: as its CMakeLists names it
    rpc=$(sed -n 's/^set(TARGET \([a-z-]*\))/\1/p' "$src/tools/rpc/CMakeLists.txt" "$src/examples/rpc/CMakeLists.txt" 2>/dev/null | head -n 1)
    targets="$targets ${rpc:-rpc-server}"
fi
cmake "$@"
# shellcheck disable=SC2086  # the targets are words
cmake --build build --target $targets -j "${MAX_JOBS:-8}"
out=$ENGINEBUILD_OUTPUTS
mkdir -p "$out/bin" "$out/lib"
for target in $targets; do cp "build/bin/$target" "$out/bin/"; done
# the target's shared libraries are the only ones built (ggml, ggml-base, ggml-cpu, llama, mtmd,
# ...): each real file and the soname link the loader asks for, not the unversioned link to link with
find build -name 'lib*.so*' | sort | while read -r lib; do
    case $lib in *.so) [ -L "$lib" ] && continue ;; esac
    cp -P "$lib" "$out/lib/"
done
"$out/bin/llama-server" --version
