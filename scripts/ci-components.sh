#!/usr/bin/env bash
# The fan-out of .github/workflows/enginebuild-publish.yml (input spread: true), runnable anywhere:
# each component to build gets a job of its own, on its own runner, pushing its outputs to the
# registry cache; the last job (scripts/ci-publish.sh) then pulls them and assembles the images.
#
#   bash scripts/ci-components.sh plan    the components the changed images need built (neither in the
#                                         cache nor here), as a job matrix: matrix={"include": [{"image":
#                                         …, "component": …}, …]} on stdout and into $GITHUB_OUTPUT
#   bash scripts/ci-components.sh build   build ENGINEBUILD_COMPONENT of ENGINEBUILD_IMAGE (and what it
#                                         needs) and push its outputs to the cache
#
# Settings as scripts/ci-publish.sh (ENGINEBUILD_PUBLISH_TO, _PUBLISH_PUSH, _PLATFORM, _PUBLISH_IMAGES,
# ENGINEBUILD_CACHE_TO, REGISTRY_USER/REGISTRY_TOKEN). Without pushing (a pull request) the cache is
# read-only, so nothing is spread: the matrix is empty and the last job builds everything itself.
set -euo pipefail
# the recipe repository: ENGINEBUILD_RECIPE_ROOT (the workflow's checkout), else this one
cd "${ENGINEBUILD_RECIPE_ROOT:-$(dirname "$0")/..}"
PY=${PYTHON:-python3}
# the enginebuild to run: ENGINEBUILD_COMMAND (the workflow's pip-installed `enginebuild`), else this checkout's
if [[ -n "${ENGINEBUILD_COMMAND:-}" ]]; then read -r -a eb <<< "$ENGINEBUILD_COMMAND"; else eb=("$PY" BUILD.py); fi
: "${ENGINEBUILD_PUBLISH_TO:?set ENGINEBUILD_PUBLISH_TO to REGISTRY/NAMESPACE, e.g. ghcr.io/OWNER}"
prefix=${ENGINEBUILD_PUBLISH_TO%/}
push=${ENGINEBUILD_PUBLISH_PUSH:-false}
platform=${ENGINEBUILD_PLATFORM:-linux/arm64}
cache=${ENGINEBUILD_CACHE_TO:-$prefix/enginebuild-cache}
case "$push" in true|false) ;; *) echo "ENGINEBUILD_PUBLISH_PUSH must be true or false, not '$push'" >&2; exit 2;; esac
if [[ "$cache" == none ]]; then echo "spreading components over jobs needs the registry cache" >&2; exit 2; fi

if [[ -n "${REGISTRY_TOKEN:-}" ]]; then
  printf '%s' "$REGISTRY_TOKEN" | docker login "${prefix%%/*}" -u "${REGISTRY_USER:-token}" --password-stdin >/dev/null
fi

case "${1:-}" in
  plan)
    read -r -a images <<< "${ENGINEBUILD_PUBLISH_IMAGES:-}"
    include="[]"
    if [[ "$push" == true ]]; then
      changed_json=$("${eb[@]}" changed "${images[@]}" --prefix "$prefix" --platform "$platform" --json)
      mapfile -t lacking < <(printf '%s' "$changed_json" | "$PY" -c '
import json, sys
for row in json.load(sys.stdin)["images"]:
    if not row["digest"]:
        print(row["image"])')
      if (( ${#lacking[@]} )); then
        include=$("${eb[@]}" plan "${lacking[@]}" --platform "$platform" --cache "$cache" --json | "$PY" -c '
import json, sys
print(json.dumps([{"image": doc["image"].split(":")[0], "component": name}
                  for doc in json.load(sys.stdin)["images"] for name in doc["components_to_build"]]))')
      fi
    fi
    line="matrix={\"include\": $include}"
    echo "$line"
    if [[ -n "${GITHUB_OUTPUT:-}" ]]; then echo "$line" >> "$GITHUB_OUTPUT"; fi
    ;;
  build)
    : "${ENGINEBUILD_IMAGE:?set ENGINEBUILD_IMAGE}" "${ENGINEBUILD_COMPONENT:?set ENGINEBUILD_COMPONENT}"
    cache_args=(--cache "$cache")
    [[ "$push" == true ]] || cache_args+=(--cache-readonly)
    "${eb[@]}" image "$ENGINEBUILD_IMAGE" --locked --platform "$platform" --component "$ENGINEBUILD_COMPONENT" \
      "${cache_args[@]}"
    ;;
  *)
    echo "usage: ci-components.sh plan|build" >&2
    exit 2
    ;;
esac
