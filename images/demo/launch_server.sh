#!/bin/sh
# Launches demo-engine with the runtime contract of the catalogue's images:
# MODEL_PATH (required), SERVED_MODEL_NAME (default: basename of MODEL_PATH), PORT,
# DRAFTER_LAYER_IDS (the drafter's target layer ids), EXTRA_ARGS (passed verbatim).
set -eu
if [ -z "${MODEL_PATH:-}" ]; then
    echo "launch_server.sh: MODEL_PATH is not set; mount a model and set MODEL_PATH" >&2
    exit 2
fi
served=${SERVED_MODEL_NAME:-$(basename "$MODEL_PATH")}
set -- demo-engine --model "$MODEL_PATH" --served-model-name "$served" --port "${PORT:-8000}"
if [ -n "${DRAFTER_LAYER_IDS:-}" ]; then
    set -- "$@" --aux-layers "$DRAFTER_LAYER_IDS"
fi
# EXTRA_ARGS is split on whitespace on purpose: it carries extra options.
# shellcheck disable=SC2086
set -- "$@" ${EXTRA_ARGS:-}
echo "launch_server.sh: $*"
exec "$@"
