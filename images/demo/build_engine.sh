#!/bin/sh
# Builds demo-engine from its (patched) source in the current folder.
# DEMO_ENGINE_UNITS sets how many kernel units are compiled (the amount of compiler work).
set -eu
units=${DEMO_ENGINE_UNITS:-2}
jobs=$(nproc 2>/dev/null || echo 2)
mkdir -p build
: > build/units.list
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
i=0
while [ "$i" -lt "$units" ]; do echo "$i" >> build/units.list; i=$((i + 1)); done
echo "compiling $units kernel units with $jobs jobs"
# CFLAGS is a list of compiler flags: word splitting is wanted.
# shellcheck disable=SC2086
{
    xargs -P "$jobs" -I {} gcc ${CFLAGS:--O2} -DUNIT={} -c kernel.c -o build/unit_{}.o < build/units.list
    gcc ${CFLAGS:--O2} -I. -c build/run_kernels.c -o build/run_kernels.o
    gcc ${CFLAGS:--O2} -c engine.c -o build/engine.o
}
mkdir -p /usr/local/bin
gcc -static -o /usr/local/bin/demo-engine build/engine.o build/run_kernels.o build/unit_*.o
rm -rf build
echo "built /usr/local/bin/demo-engine"
