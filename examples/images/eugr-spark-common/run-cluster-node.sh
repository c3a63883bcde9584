#!/bin/bash
# One node of a Ray cluster of Sparks: the head when RAY_HEAD_ADDRESS is unset, else a worker
# joining it. The node stays in the foreground so the container lives as long as Ray does.
set -euo pipefail
if [[ -z "${RAY_HEAD_ADDRESS:-}" ]]; then
    exec ray start --head --port="${RAY_PORT:-6379}" --block
fi
exec ray start --address="$RAY_HEAD_ADDRESS" --block
