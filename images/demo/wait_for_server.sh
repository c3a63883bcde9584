#!/bin/sh
# Waits until the server answers /health (or /v1/models): wait_for_server.sh [URL] [TIMEOUT_S]
set -eu
url=${1:-http://127.0.0.1:${PORT:-8000}}
timeout=${2:-60}
waited=0
while [ "$waited" -lt "$timeout" ]; do
    if wget -q -O /dev/null "$url/health" 2>/dev/null || wget -q -O /dev/null "$url/v1/models" 2>/dev/null; then
        echo "wait_for_server.sh: $url is up after ${waited}s"
        exit 0
    fi
    sleep 1
    waited=$((waited + 1))
done
echo "wait_for_server.sh: $url did not answer within ${timeout}s" >&2
exit 1
