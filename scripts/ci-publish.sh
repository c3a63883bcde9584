#!/usr/bin/env bash
# The build-and-push job of .github/workflows/enginebuild-publish.yml, runnable anywhere.
#
#   ENGINEBUILD_PUBLISH_TO=ghcr.io/OWNER  (required) images go to $ENGINEBUILD_PUBLISH_TO/IMAGE
#   ENGINEBUILD_PUBLISH_PUSH=true|false   push (main) or only build (pull requests); default false
#   ENGINEBUILD_PLATFORM=linux/arm64      the platform this runner builds; default linux/arm64
#   ENGINEBUILD_PUBLISH_IMAGES="a b"      which images to consider; default every buildable one
#   ENGINEBUILD_CACHE_TO=REGISTRY/REPO    registry stage cache; default $ENGINEBUILD_PUBLISH_TO/enginebuild-cache
#                                         ("none" for no cache); read-only when not pushing
#   ENGINEBUILD_PUBLISH_COMPRESSION=gzip|gzip-isal|zstd  the layers' compression; default gzip
#                                   (gzip-isal: ISA-L, ~10x faster; zstd: Docker 23+)
#   ENGINEBUILD_SIGNING_KEY               if set (PEM text or a path), pushes are signed (`push --sign`)
#   REGISTRY_USER, REGISTRY_TOKEN         if set, `docker login` to the registry (token on stdin only)
#   GITHUB_STEP_SUMMARY, GITHUB_SHA       if set, digests go to the job summary; git-<sha> tag
#
# Steps: lockfiles match the specs; every patch stack applies; `changed` names the images whose
# content tag (a hash of their inputs) is not in the registry yet; each is built for the
# platform (pulling what the cache holds) and, when pushing, pushed by digest with its content
# tag, `latest` and git-<sha>, with its SBOM and provenance attached. Push records are written
# to lockfiles/*.pushes.json for the workflow to keep as an artifact.
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
compression=${ENGINEBUILD_PUBLISH_COMPRESSION:-gzip}
case "$compression" in gzip|gzip-isal|zstd) ;; *) echo "ENGINEBUILD_PUBLISH_COMPRESSION must be gzip, gzip-isal or zstd, not '$compression'" >&2; exit 2;; esac

if [[ -n "${REGISTRY_TOKEN:-}" ]]; then
  printf '%s' "$REGISTRY_TOKEN" | docker login "${prefix%%/*}" -u "${REGISTRY_USER:-token}" --password-stdin >/dev/null
fi

read -r -a images <<< "${ENGINEBUILD_PUBLISH_IMAGES:-}"
"${eb[@]}" lock --check --buildable "${images[@]}"
if (( ${#images[@]} )); then "${eb[@]}" patches check "${images[@]}"; else "${eb[@]}" patches check --all; fi

changed_json=$("${eb[@]}" changed "${images[@]}" --prefix "$prefix" --platform "$platform" \
  --compression "$compression" --json)
mapfile -t rows < <(printf '%s' "$changed_json" | "$PY" -c '
import json, sys
for row in json.load(sys.stdin)["images"]:
    print(row["image"], row["tag"], row["digest"] or "-")')

cache_args=()
if [[ "$cache" != none ]]; then
  cache_args=(--cache "$cache")
  [[ "$push" == true ]] || cache_args+=(--cache-readonly)
fi
summary=${GITHUB_STEP_SUMMARY:-/dev/null}
{
  echo "## enginebuild: $platform"
  echo
  echo "| image | status | pull by digest |"
  echo "|---|---|---|"
} >> "$summary"

pushed_all=()
for row in "${rows[@]}"; do
  read -r image tag digest <<< "$row"
  if [[ "$digest" != - ]]; then
    echo "$image: unchanged ($prefix/$image:$tag is $digest)"
    echo "| $image | unchanged | \`$prefix/$image@$digest\` |" >> "$summary"
    continue
  fi
  echo "$image: building for $platform"
  # --no-load: the runner never runs the image; its layers go from the store to the registry
  "${eb[@]}" image "$image" --locked --no-load --platform "$platform" "${cache_args[@]}"
  if [[ "$push" != true ]]; then
    echo "| $image | built, not pushed | - |" >> "$summary"
    continue
  fi
  tags=(--tag "$tag" --tag latest)
  [[ -n "${GITHUB_SHA:-}" ]] && tags+=(--tag "git-${GITHUB_SHA:0:12}")
  # signed when the job holds a signing key (read by enginebuild from the environment, never printed)
  [[ -n "${ENGINEBUILD_SIGNING_KEY:-}" ]] && tags+=(--sign)
  # the cache (when pushing) is told each layer it now holds: a later fresh runner makes none of them
  pushed=$("${eb[@]}" push "$image" --to "$prefix/$image" --platform "$platform" --compression "$compression" \
    "${cache_args[@]}" \
    "${tags[@]}" | tail -n 1)
  echo "$image: pushed $pushed"
  pushed_all+=("$pushed")
  echo "| $image | pushed | \`$pushed\` |" >> "$summary"
done
# the digests pushed, for a later job (the workflow's keyless signing job) to sign
if [[ -n "${GITHUB_OUTPUT:-}" ]]; then echo "pushed=${pushed_all[*]:-}" >> "$GITHUB_OUTPUT"; fi
