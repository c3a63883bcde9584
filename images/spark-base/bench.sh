#!/bin/sh
# Benchmarks a running server with llama-benchy (pinned 0.3.6 in the images that carry it).
#   BENCH_URL (default http://127.0.0.1:$PORT/v1), BENCH_PP (2048), BENCH_TG (128),
#   BENCH_DEPTH (0), BENCH_CONCURRENCY (1), BENCH_RUNS (3), extra arguments are passed on.
#   BENCH_MODEL             the name the server answers to (default: SERVED_MODEL_NAME, else
#                           the first id of the server's /v1/models)
#   BENCH_TOKENIZER         a tokenizer folder (default: MODEL_PATH when it is a folder)
#   BENCH_BOOK              a local text file for the prompts instead of llama-benchy's default
#                           download (offline machines); handed over through llama-benchy's
#                           own text cache, keyed by the file:// address it is given
#   BENCH_RESULT            write the results there as JSON (llama-benchy --save-result)
set -eu
say() { echo "bench.sh: $*"; }
die() { echo "bench.sh: $*" >&2; exit 2; }
if ! command -v llama-benchy >/dev/null 2>&1; then
    echo "bench.sh: llama-benchy is not installed in this image; run this script from a machine with" >&2
    echo "          'pip install llama-benchy==0.3.6' and BENCH_URL pointing at the server" >&2
    exit 2
fi
url=${BENCH_URL:-http://127.0.0.1:${PORT:-8000}/v1}

# the first model id the server lists ({"data":[{"id":"NAME",...)
served_id() {
    if command -v curl >/dev/null 2>&1; then curl -fsS --max-time 10 "$url/models"; else wget -q -O - "$url/models"; fi 2>/dev/null |
        awk -F '"id"[[:space:]]*:[[:space:]]*"' 'NF > 1 { split($2, rest, "\""); print rest[1]; exit }'
}
model=${BENCH_MODEL:-${SERVED_MODEL_NAME:-$(served_id)}}
[ -n "$model" ] || die "no model name: $url/models lists none (is the server up?); set BENCH_MODEL"

# BENCH_PP, BENCH_TG, BENCH_DEPTH and BENCH_CONCURRENCY may list several values ("512 2048").
# shellcheck disable=SC2086
set -- --base-url "$url" --model "$model" \
    --pp ${BENCH_PP:-2048} --tg ${BENCH_TG:-128} --depth ${BENCH_DEPTH:-0} \
    --concurrency ${BENCH_CONCURRENCY:-1} --runs "${BENCH_RUNS:-3}" "$@"
tokenizer=${BENCH_TOKENIZER:-}
if [ -z "$tokenizer" ] && [ -n "${MODEL_PATH:-}" ] && [ -d "$MODEL_PATH" ]; then tokenizer=$MODEL_PATH; fi
if [ -n "$tokenizer" ]; then set -- "$@" --tokenizer "$tokenizer"; fi
if [ -n "${BENCH_BOOK:-}" ]; then
    [ -f "$BENCH_BOOK" ] || die "BENCH_BOOK=$BENCH_BOOK is not a file"
    book="file://$BENCH_BOOK"
    cache=${HOME:-/root}/.cache/llama-benchy
    mkdir -p "$cache"
    cp "$BENCH_BOOK" "$cache/$(printf %s "$book" | md5sum | cut -d ' ' -f 1).txt"
    set -- "$@" --book-url "$book"
fi
if [ -n "${BENCH_RESULT:-}" ]; then set -- "$@" --save-result "$BENCH_RESULT" --format json; fi
say "llama-benchy $*"
key=${VLLM_API_KEY:-${LLAMA_ARG_API_KEY:-}}  # vLLM's or llama-server's key, never printed
if [ -n "$key" ]; then set -- "$@" --api-key "$key"; fi
exec llama-benchy "$@"
