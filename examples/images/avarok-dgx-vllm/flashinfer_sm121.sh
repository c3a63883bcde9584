#!/bin/sh
# Let FlashInfer's JIT compile for sm_121 where it lists sm_120 (our own rewrite), in the
# installed package folder named.
set -eu
grep -rl '"sm_120a"' "$1/jit" | while read -r f; do sed -i 's/"sm_120a"/"sm_120a", "sm_121a"/' "$f"; done
