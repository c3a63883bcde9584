#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine for enginebuild, idempotently, in one of two sizes:
#
#   bash scripts/setup.sh demo [--all-platforms]   what building the demo needs: the Docker engine
#       (docker.io), started, and a virtual environment .venv with requirements.txt; with
#       --all-platforms also qemu-user-static and binfmt-support (arm64 under emulation)
#   bash scripts/setup.sh [test]                   everything the test suite needs as well: the CNCF
#       registry on 127.0.0.1:5000, busybox, shellcheck, git, npm, sshd, apache2-utils, qemu,
#       a pinned buildx aside, and requirements-test.txt in .venv
#
# Python packages go into .venv (ENGINEBUILD_VENV), never into the system's Python.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${1:-test}
ALL_PLATFORMS=no
case "$MODE" in
    demo) [ "${2:-}" = "--all-platforms" ] && ALL_PLATFORMS=yes ;;
    test) ALL_PLATFORMS=yes ;;
    *) echo "setup: unknown mode '$MODE' (demo or test)" >&2; exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
BASE_PY=${ENGINEBUILD_PYTHON:-python3}
VENV=${ENGINEBUILD_VENV:-.venv}

packages=()
command -v dockerd >/dev/null || packages+=(docker.io)
"$BASE_PY" -c 'import venv, ensurepip' 2>/dev/null || packages+=(python3-venv)
if [ "$MODE" = test ]; then
    command -v docker-registry >/dev/null || packages+=(docker-registry)
    [ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -qx httpd || packages+=(busybox-static)
    command -v shellcheck >/dev/null || packages+=(shellcheck)
    command -v git >/dev/null || packages+=(git)
    command -v patch >/dev/null || packages+=(patch)
    command -v curl >/dev/null || packages+=(curl)
    command -v npm >/dev/null || packages+=(npm)
    command -v ip >/dev/null || packages+=(iproute2)
    command -v htpasswd >/dev/null || packages+=(apache2-utils)
    [ -x /usr/sbin/sshd ] || packages+=(openssh-server)
    command -v gpgv >/dev/null || packages+=(gpgv)
    command -v gpg >/dev/null || packages+=(gpg)
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || packages+=(debian-archive-keyring)
fi
if [ "$ALL_PLATFORMS" = yes ]; then
    [ -x /usr/bin/qemu-aarch64-static ] || packages+=(qemu-user-static)
    command -v update-binfmts >/dev/null || packages+=(binfmt-support)
fi
if [ ${#packages[@]} -gt 0 ]; then
    echo "setup: installing ${packages[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

# arm64 under emulation: qemu-aarch64 registered with binfmt_misc, flag F (fix-binary), so that
# containers and BuildKit steps of linux/arm64 images run on this machine.
arm64="no"
if [ "$(uname -m)" = aarch64 ]; then
    arm64="native"
elif [ "$ALL_PLATFORMS" = no ]; then
    arm64="not set up (setup.sh demo --all-platforms)"
else
    [ -e /proc/sys/fs/binfmt_misc/register ] || $SUDO mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null || true
    if [ -e /proc/sys/fs/binfmt_misc/register ]; then
        [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || $SUDO update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true
        if grep -qs '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 && grep -qxs enabled /proc/sys/fs/binfmt_misc/qemu-aarch64; then
            arm64="emulated (qemu-aarch64, fix-binary)"
        fi
    fi
    if [ "$arm64" = no ]; then  # not reached for the demo's own platform
        echo "setup: WARNING: binfmt_misc cannot be used here (not mountable, or qemu-aarch64 not registered with" \
             "flag F): linux/arm64 images cannot be built or run on this machine" >&2
    fi
fi

# The pinned Python packages, in a virtual environment of the project's own
[ -x "$VENV/bin/python" ] || "$BASE_PY" -m venv "$VENV"
wanted=requirements.txt
[ "$MODE" = test ] && wanted=requirements-test.txt
stamp="$VENV/.installed-$(cat requirements.txt "$wanted" | sha256sum | cut -c1-16)-$MODE"
if [ ! -e "$stamp" ]; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$wanted"
    touch "$stamp"
fi

# docker buildx, pinned (Debian's package, by sha256), unpacked aside as a standalone command for
# the tests of `render --bake` only: installed as a CLI plugin it would change how `docker build`
# runs here. The tests find it at $BUILDX.
BUILDX=/opt/enginebuild-buildx/usr/libexec/docker/cli-plugins/docker-buildx
case "$(dpkg --print-architecture 2>/dev/null || echo none)" in
    amd64) buildx_deb=docker-buildx_0.13.1+ds1-3_amd64.deb
           buildx_sha=fcf8c48204d1603c8f209451d7827eb91bf30759578baf7704e9e1a87e5f1d7f ;;
    arm64) buildx_deb=docker-buildx_0.13.1+ds1-3_arm64.deb
           buildx_sha=6cf361ab892b55753b728adcbd1a99f0616711df853dba64a5297a4a676d96b0 ;;
    *) buildx_deb="" ;;
esac
if [ "$MODE" = test ] && [ -n "$buildx_deb" ] && [ ! -x "$BUILDX" ]; then
    echo "setup: unpacking $buildx_deb"
    tmp_deb=$(mktemp)
    curl -fsSL -o "$tmp_deb" "http://deb.debian.org/debian/pool/main/d/docker-buildx/$buildx_deb"
    echo "$buildx_sha  $tmp_deb" | sha256sum -c --quiet - || { echo "setup: $buildx_deb: sha256 mismatch" >&2; exit 1; }
    $SUDO mkdir -p /opt/enginebuild-buildx
    $SUDO dpkg-deb -x "$tmp_deb" /opt/enginebuild-buildx
    rm -f "$tmp_deb"
fi

# The Docker engine: the one enginebuild builds with.
if ! docker version >/dev/null 2>&1; then
    echo "setup: starting dockerd"
    $SUDO sh -c 'nohup dockerd --host=unix:///var/run/docker.sock >/tmp/enginebuild-dockerd.log 2>&1 &'
    for _ in $(seq 1 60); do
        docker version >/dev/null 2>&1 && break
        sleep 1
    done
    docker version >/dev/null 2>&1 || { echo "setup: dockerd did not start; see /tmp/enginebuild-dockerd.log" >&2; exit 1; }
fi

if [ "$MODE" = demo ]; then
    echo "setup: ready for the demo (docker $(docker version --format '{{.Server.Version}}'), $VENV, arm64: $arm64)"
    exit 0
fi

# A local OCI registry for pushes and the registry-backed stage cache.
if ! curl -fsS -o /dev/null http://127.0.0.1:5000/v2/ 2>/dev/null; then
    echo "setup: starting a registry on 127.0.0.1:5000"
    mkdir -p /tmp/enginebuild-registry
    cat >/tmp/enginebuild-registry/config.yml <<'YAML'
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: /tmp/enginebuild-registry/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:5000
YAML
    nohup docker-registry serve /tmp/enginebuild-registry/config.yml >/tmp/enginebuild-registry/log 2>&1 &
    for _ in $(seq 1 30); do
        curl -fsS -o /dev/null http://127.0.0.1:5000/v2/ 2>/dev/null && break
        sleep 0.5
    done
    curl -fsS -o /dev/null http://127.0.0.1:5000/v2/ || { echo "setup: the registry did not start" >&2; exit 1; }
fi
echo "setup: ready (docker $(docker version --format '{{.Server.Version}}'), registry 127.0.0.1:5000, arm64: $arm64)"
