#!/usr/bin/env bash
# The whole test suite, on a fresh machine: set up the real parts (scripts/setup.sh: Debian's
# packages, the engine, the registry, and .venv with requirements-test.txt), then run pytest
# from .venv. Under CI=true, tests that need Docker, git, a registry or PyPI fail instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
VENV=$(cd "${ENGINEBUILD_VENV:-.venv}" && pwd)
export PATH="$VENV/bin:$PATH" PYTHON="$VENV/bin/python"
exec "$VENV/bin/python" -m pytest --durations=15 "$@"
