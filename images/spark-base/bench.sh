#!/bin/sh
# Benchmarks a running server with llama-benchy (pinned 0.3.6 in vLLM images).
#   BENCH_URL (default http://127.0.0.1:$PORT/v1), BENCH_PP (2048), BENCH_TG (128),
#   BENCH_DEPTH (0), BENCH_CONCURRENCY (1), BENCH_RUNS (3), extra arguments are passed on.
set -eu
if ! command -v llama-benchy >/dev/null 2>&1; then
    echo "bench.sh: llama-benchy is not installed in this image; run this script from a machine with" >&2
    echo "          'pip install llama-benchy==0.3.6' and BENCH_URL pointing at the server" >&2
    exit 2
fi
url=${BENCH_URL:-http://127.0.0.1:${PORT:-8000}/v1}
model=${SERVED_MODEL_NAME:-$(basename "${MODEL_PATH:-model}")}
# BENCH_PP, BENCH_TG, BENCH_DEPTH and BENCH_CONCURRENCY may list several values ("512 2048").
# shellcheck disable=SC2086
set -- --base-url "$url" --model "$model" \
    --pp ${BENCH_PP:-2048} --tg ${BENCH_TG:-128} --depth ${BENCH_DEPTH:-0} \
    --concurrency ${BENCH_CONCURRENCY:-1} --runs "${BENCH_RUNS:-3}" "$@"
if [ -n "${MODEL_PATH:-}" ] && [ -d "$MODEL_PATH" ]; then set -- "$@" --tokenizer "$MODEL_PATH"; fi
echo "bench.sh: llama-benchy $*"
if [ -n "${VLLM_API_KEY:-}" ]; then set -- "$@" --api-key "$VLLM_API_KEY"; fi
exec llama-benchy "$@"
