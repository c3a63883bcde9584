#!/usr/bin/env bash
# Builds the offline demo image on a fresh machine: set up, lock check, build, smoke-run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=${PYTHON:-python3}
"$PY" BUILD.py lock --check demo
"$PY" BUILD.py image demo "$@"
echo
echo "run it:  docker run --rm -p 8000:8000 -e SERVED_MODEL_NAME=demo enginebuild/demo:latest"
