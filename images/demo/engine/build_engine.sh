#!/bin/sh
# Builds demo-engine from its (patched) source, linked statically against the kernel library
# the `kernels` component produced (handed over at $ENGINEBUILD_DEP_KERNELS).
set -eu
kernels=${ENGINEBUILD_DEP_KERNELS:?the kernels component is a need of this one}
# CFLAGS is a list of compiler flags: word splitting is wanted.
# shellcheck disable=SC2086
gcc ${CFLAGS:--O2} -I"$kernels/include" -c engine.c -o engine.o
mkdir -p /usr/local/bin
gcc -static -o /usr/local/bin/demo-engine engine.o -L"$kernels/lib" -lkernels
echo "built /usr/local/bin/demo-engine"
