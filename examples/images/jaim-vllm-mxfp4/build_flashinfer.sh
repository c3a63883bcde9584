#!/bin/sh
# FlashInfer from the pinned fork, with the CUTLASS fork in place of its vendored copy, built
# where the image keeps it (enginebuild then makes its editable wheel with the builder's Python).
set -eu
rm -rf 3rdparty/cutlass
cp -a "$FORK_CUTLASS_DIR" 3rdparty/cutlass
echo "FlashInfer for ${FLASHINFER_CUDA_ARCH_LIST:?} with CUTLASS from $FORK_CUTLASS_DIR"
