#!/bin/sh
# Builds the demo's kernel library: DEMO_KERNEL_UNITS translation units of real compiler
# work (like an engine's per-architecture CUDA kernels), archived into libkernels.a, and
# installed with its header into $ENGINEBUILD_OUTPUTS (the component's declared prefix).
set -eu
units=${DEMO_KERNEL_UNITS:-2}
jobs=${DEMO_JOBS:-$(nproc 2>/dev/null || echo 2)}
out=$ENGINEBUILD_OUTPUTS
mkdir -p build "$out/lib" "$out/include"
{
    echo '#include "kernels.h"'
    i=0
    while [ "$i" -lt "$units" ]; do echo "unsigned long kernel_unit_$i(unsigned long);"; i=$((i + 1)); done
    echo 'unsigned long run_kernels(unsigned long seed) {'
    echo '    unsigned long acc = seed;'
    i=0
    while [ "$i" -lt "$units" ]; do echo "    acc ^= kernel_unit_$i(acc);"; i=$((i + 1)); done
    echo '    return acc;'
    echo '}'
} > build/run_kernels.c
: > build/units.list
i=0
while [ "$i" -lt "$units" ]; do echo "$i" >> build/units.list; i=$((i + 1)); done
# through ccache when the build names its folder (CCACHE_DIR) and the builder has it
cc=gcc
if [ -n "${CCACHE_DIR:-}" ] && command -v ccache >/dev/null 2>&1; then
    cc="ccache gcc"
    ccache -z >/dev/null
fi
echo "compiling $units kernel units with $jobs jobs ($cc)"
# CFLAGS is a list of compiler flags, cc a command and its argument: word splitting is wanted.
# shellcheck disable=SC2086
{
    xargs -P "$jobs" -I {} $cc ${CFLAGS:--O2} -DUNIT={} -c kernel.c -o build/unit_{}.o < build/units.list
    $cc ${CFLAGS:--O2} -I. -c build/run_kernels.c -o build/run_kernels.o
}
if [ "$cc" != gcc ]; then
    ccache --print-stats | awk -F '\t' '$1 == "cache_miss" { m = $2 }
        $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { h += $2 }
        END { print "compiler cache: " m + 0 " compiled, " h + 0 " from the cache" }'
fi
# busybox sh prefers its own applets to PATH: name binutils' ar explicitly
/usr/bin/ar rcsD "$out/lib/libkernels.a" build/run_kernels.o build/unit_*.o
cp kernels.h "$out/include/"
echo "built $out/lib/libkernels.a"
