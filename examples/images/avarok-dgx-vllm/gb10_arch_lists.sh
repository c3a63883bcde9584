#!/bin/sh
# Add 12.1 to vLLM's CUDA architecture list and 12.0f/12.1f to the kernel families that
# accept them (our own rewrite of what the recipe's sed lines do), in the file named.
set -eu
f="$1"
sed -i 's/"7\.5;8\.0;8\.6;8\.7;8\.9;9\.0;10\.0;11\.0;12\.0")/"7.5;8.0;8.6;8.7;8.9;9.0;10.0;11.0;12.0;12.1")/' "$f"
sed -i 's/(SCALED_MM_ARCHS "10\.0f;11\.0f"/(SCALED_MM_ARCHS "10.0f;11.0f;12.0f;12.1f"/' "$f"
sed -i 's/(MLA_ARCHS "10\.0f;11\.0f;12\.0f"/(MLA_ARCHS "10.0f;11.0f;12.0f;12.1f"/' "$f"
