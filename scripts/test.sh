#!/usr/bin/env bash
# The whole test suite, on a fresh machine: set up the real parts, then run pytest.
# Under CI=true, tests that need Docker, git, a registry or PyPI fail instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${PYTHON:-python3}" -m pytest --durations=15 "$@"
