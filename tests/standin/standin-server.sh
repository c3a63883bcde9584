#!/bin/sh
# A stand-in for an engine's server binary (vllm, llama-server) in container tests:
# records its argv (one per line) and environment, then answers /health and /v1/models.
set -eu
if [ "${1:-}" = --help ]; then  # an engine older than llama.cpp's --spec-draft-n-max rename
    echo "usage: $(basename "$0") [options]"; echo "  --draft-max N"; echo "  --draft-min N"; exit 0
fi
state=/tmp/standin
mkdir -p "$state" /tmp/standin-www/v1
printf '%s\n' "$(basename "$0")" "$@" > "$state/argv"
env | sort > "$state/env"
port=8000
name=unknown
while [ $# -gt 0 ]; do
    case $1 in
        --port) port=$2; shift ;;
        --served-model-name | --alias) name=$2; shift ;;
    esac
    shift
done
printf '{"object":"list","data":[{"id":"%s","object":"model"}]}\n' "$name" > /tmp/standin-www/v1/models
echo ok > /tmp/standin-www/health
echo "standin $(basename "$0"): serving $name on port $port"
exec httpd -f -p "$port" -h /tmp/standin-www
