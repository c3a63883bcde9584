#!/usr/bin/env bash
# Builds the offline demo image on a fresh machine: the Docker engine and a virtual environment
# (.venv, requirements.txt only: never the system's Python), the lock checked, the image built
# for this machine's platform, smoke-run. `--all-platforms` builds linux/amd64 and linux/arm64
# (the other one under qemu, which it then sets up); other arguments go to `image`.
set -euo pipefail
cd "$(dirname "$0")/.."
all=""
args=()
for arg in "$@"; do
    if [ "$arg" = "--all-platforms" ]; then all="--all-platforms"; else args+=("$arg"); fi
done
bash scripts/setup.sh demo ${all:+"$all"}
PY=${ENGINEBUILD_VENV:-.venv}/bin/python
"$PY" BUILD.py lock --check demo
if [ -z "$all" ]; then
    case "$(uname -m)" in
        x86_64|amd64) args=(--platform linux/amd64 "${args[@]}") ;;
        aarch64|arm64) args=(--platform linux/arm64 "${args[@]}") ;;
    esac
fi
"$PY" BUILD.py image demo "${args[@]}"
echo
echo "run it:  docker run --rm -p 8000:8000 -e SERVED_MODEL_NAME=tiny enginebuild/demo:latest"
