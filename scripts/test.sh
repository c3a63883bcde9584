#!/usr/bin/env bash
# The whole test suite, on a fresh machine: set up the real parts (scripts/setup.sh: Debian's
# packages, the engine, the registry, and .venv with requirements-test.txt), then run pytest
# from .venv: the fast tier first (tests that need no engine, registry or network, run with
# none reachable, on every CPU with pytest-xdist), then the rest on ENGINEBUILD_TEST_WORKERS
# parallel workers (default 2), a test file at a time to a worker, each worker with its own
# Docker engine, registries and enginebuild home (tests/conftest.py). Under CI=true, tests that
# need Docker, git, a registry or PyPI fail instead of skipping.
#
#   bash scripts/test.sh            everything
#   bash scripts/test.sh --fast     the fast tier alone (no set-up of the engine or registry)
#   bash scripts/test.sh ARGS...    pytest ARGS (a file, -k, ...), after the full set-up
set -euo pipefail
cd "$(dirname "$0")/.."
fast_only=no
if [ "${1:-}" = "--fast" ]; then fast_only=yes; shift; fi
# the fast tier needs only the venv, with the test tools in it (scripts/setup.sh's stamp of them:
# the demo's venv, made by `setup.sh demo`, has none)
tools="${ENGINEBUILD_VENV:-.venv}/.installed-$(cat requirements.txt requirements-test.txt | sha256sum | cut -c1-16)-test"
if [ "$fast_only" = yes ] && [ -x "${ENGINEBUILD_VENV:-.venv}/bin/python" ] && [ -e "$tools" ]; then
    :
else
    bash scripts/setup.sh test
fi
VENV=$(cd "${ENGINEBUILD_VENV:-.venv}" && pwd)
export PATH="$VENV/bin:$PATH" PYTHON="$VENV/bin/python"
# the suite's processes keep their compiled modules (__pycache__/, ignored by git and by every key
# enginebuild makes): with PYTHONDONTWRITEBYTECODE set, as some machines set it, every worker and
# every fresh interpreter compiled enginebuild and pytest rewrote every test file again, seconds each
unset PYTHONDONTWRITEBYTECODE

# The fast tier's temporary files (its tests' folders, the enginebuild home, TMPDIR) go to memory
# where /dev/shm is a tmpfs with 2 GiB free: they are many small files, written and deleted, which
# a virtual disk makes the tier's largest cost (on a 2-CPU machine: 39-46 s against 54-63 s). The
# slow tier, which writes GBs, stays on disk.
scratch=""
trap '[ -z "$scratch" ] || rm -rf "$scratch"' EXIT
fast_scratch() {
    if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm)" = tmpfs ] \
        && [ "$(df -Pk /dev/shm | awk 'NR == 2 {print $4}')" -gt 2097152 ]; then
        scratch=$(mktemp -d /dev/shm/ebfast-XXXXXX)  # short: gpg-agent sockets live below it
    fi
}

fast_tier() {
    # compiled once here, not by each worker as it imports them (a clean clone has none yet)
    "$VENV/bin/python" -m compileall -q -j 0 src tests/helpers > /dev/null
    fast_scratch
    local rc=0
    (
        if [ -n "$scratch" ]; then
            export TMPDIR="$scratch"
            set -- --basetemp="$scratch/t" "$@"
        fi
        # nothing outside the process can be reached: a test in this tier that needs it fails
        DOCKER_HOST=unix:///nonexistent/fast-tier.sock ENGINEBUILD_DOCKER=/nonexistent/docker \
            HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY=127.0.0.1,localhost \
            http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 no_proxy=127.0.0.1,localhost \
            "$VENV/bin/python" -m pytest -m fast -n auto "$@"
    ) || rc=$?
    if [ -n "$scratch" ]; then rm -rf "$scratch"; scratch=""; fi
    return "$rc"
}

if [ "$fast_only" = yes ]; then
    fast_tier "$@"
    exit
fi
if [ $# -gt 0 ]; then
    exec "$VENV/bin/python" -m pytest --durations=15 "$@"
fi
# A user's images beside the suite: the machine's own engine (the one `docker` reaches here) keeps
# its images and tags through the run. Names the suite's builds use (enginebuild/demo:latest, chain
# and component tags) and one of the user's own are planted where absent (their image IDs noted
# where present), and after the slow tier each must name the same image; what was planted goes.
USER_TAGS="enginebuild/demo:latest enginebuild/demo:latest-amd64 enginebuild/llamacpp-cpu:latest
enginebuild/chain:$(printf 'f%.0s' $(seq 64)) enginebuild/component:$(printf 'e%.0s' $(seq 64)) someone/own-build:kept"
plant_user_images() {
    user_dir=$(mktemp -d)
    cp /bin/busybox "$user_dir/busybox"
    local probe id
    probe=$(tar -C "$user_dir" -c busybox | docker import -m "a user's own image (scripts/test.sh)" - 2>/dev/null)
    : > "$user_dir/planted"
    for tag in $USER_TAGS; do
        id=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
        if [ -z "$id" ]; then
            docker tag "$probe" "$tag" && id=$probe && echo "$tag" >> "$user_dir/planted"
        fi
        echo "$tag $id" >> "$user_dir/before"
    done
}
count_user_images() {
    local tag id now left=0 total=0
    while read -r tag id; do
        total=$((total + 1))
        now=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
        if [ "$now" = "$id" ]; then left=$((left + 1)); else echo "test.sh: the suite changed $tag ($id -> ${now:-gone})" >&2; fi
    done < "$user_dir/before"
    # said only when one was changed: pytest's summary stays the run's last line
    [ "$left" = "$total" ] || echo "test.sh: user images beside the suite: $left of $total left as they were" >&2
    xargs -r docker rmi < "$user_dir/planted" > /dev/null 2>&1 || true
    rm -rf "$user_dir"
    [ "$left" = "$total" ]
}

fast_tier -q
plant_user_images
rc=0
"$VENV/bin/python" -m pytest --durations=15 -m "not fast" -n "${ENGINEBUILD_TEST_WORKERS:-2}" \
    --dist loadgroup --no-loadscope-reorder || rc=$?
count_user_images || { [ "$rc" != 0 ] || rc=1; }
exit "$rc"
