#!/bin/sh
# Waits until a server answers /health or /v1/models.
# Usage: wait_for_server.sh [BASE_URL] [TIMEOUT_SECONDS]   (default: http://127.0.0.1:$PORT, 600 s)
set -eu
url=${1:-http://127.0.0.1:${PORT:-8000}}
timeout=${2:-600}
fetch() {
    if command -v curl >/dev/null 2>&1; then
        curl -fsS -o /dev/null --max-time 5 "$1"
    elif command -v timeout >/dev/null 2>&1; then
        timeout 5 wget -q -O /dev/null "$1"  # (busybox wget -T crashes in some builds)
    else
        wget -q -O /dev/null "$1"
    fi
}
waited=0
while [ "$waited" -lt "$timeout" ]; do
    if fetch "$url/health" 2>/dev/null || fetch "$url/v1/models" 2>/dev/null; then
        echo "wait_for_server.sh: $url is up after ${waited}s"
        exit 0
    fi
    sleep 2
    waited=$((waited + 2))
done
echo "wait_for_server.sh: $url did not answer within ${timeout}s" >&2
exit 1
