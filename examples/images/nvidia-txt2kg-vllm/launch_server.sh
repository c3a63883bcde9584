#!/bin/bash
# Serve the model in /app/models (or $MODEL) on port 8001 with vLLM's OpenAI-compatible server.
set -euo pipefail
exec vllm serve "${MODEL:-/app/models}" --host 0.0.0.0 --port 8001 \
    --gpu-memory-utilization "${GPU_MEMORY_UTILIZATION:-0.8}" ${EXTRA_ARGS:-}
