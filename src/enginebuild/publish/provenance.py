"""The provenance of a pushed image: an in-toto Statement (v1) with a SLSA provenance (v1)
predicate. The build definition is the spec and the lock (their sha256); the resolved
dependencies are every input of the lock (see `dependencies`); the builder is this machine, or the GitHub Actions
workflow run that pushed it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from enginebuild import __version__
from enginebuild.core import keys
from enginebuild.lock.lockfile import Lock
from enginebuild.recipe.model import ImageSpec
from enginebuild.wire import JsonDoc

STATEMENT = "https://in-toto.io/Statement/v1"
PREDICATE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://enginebuild.dev/buildtypes/image/v1"


def _file(root: Path, rel: str) -> JsonDoc:
    return {"uri": rel, "digest": {"sha256": hashlib.sha256((root / rel).read_bytes()).hexdigest()}}


def pin_digest(pin: JsonDoc) -> str:
    """The sha256 of a resolved pin as the lockfile holds it (canonical JSON)."""

    return keys.sha(keys.canonical(pin))


def dependencies(lock: Lock, lockfile: str) -> list[JsonDoc]:
    """One descriptor per input of the lock. A package set (system packages, a Python closure of
    hundreds of distributions) is named by the digest of its pin, which lists each package's
    sha256; the SBOM attached beside lists them one by one. The statement stays a few KB, and
    is all a push after a script edit has to send again (it names the new digest)."""
    out = []
    for name, entry in sorted(lock.entries.items()):
        pin = entry.resolved
        if pin is None:
            continue
        if ".base@" in name and pin.get("digest"):
            out.append({"name": name, "uri": pin["ref"], "digest": {"sha256": pin["digest"].split(":")[1]}})
        elif "commit" in pin:
            out.append({"name": name, "uri": f"git+{pin['url']}", "digest": {"gitCommit": pin["commit"]}})
        elif "sha256" in pin and "packages" not in pin:
            out.append({"name": name, "uri": pin.get("url", name), "digest": {"sha256": pin["sha256"]}})
        else:
            out.append({"name": name, "uri": f"{lockfile}#{name}",
                        "digest": {"sha256": pin_digest(pin)}})
    return out


def builder_id() -> tuple[str, JsonDoc]:
    server, repo, run = (os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run:
        workflow = os.environ.get("GITHUB_WORKFLOW_REF", "")
        return f"{server}/{workflow or repo}", {"invocationId": f"{server}/{repo}/actions/runs/{run}"}
    return "https://enginebuild.dev/builders/local", {}


def make_provenance(root: Path, spec: ImageSpec, lock: Lock, repository: str, subject_digest: str,
                    platforms: dict[str, str], parameters: JsonDoc | None = None, sbom: str = "") -> bytes:
    """`parameters`: the per-build values (--set, --build-arg, --on, --stages), in externalParameters;
    `sbom`: the sha256 of the SBOM pushed beside it, named among the run's byproducts."""
    builder, metadata = builder_id()
    files = [_file(root, f"images/{name}/image.yaml") for name in spec.chain]
    files.append(_file(root, f"lockfiles/{spec.lock_name}.lock"))
    files += [_file(root, f"patches/{p.name}") for _, p in spec.all_patches]
    statement = {
        "_type": STATEMENT,
        "subject": [{"name": repository, "digest": {"sha256": subject_digest.split(":")[1]}}]
        + [{"name": f"{repository}#{p}", "digest": {"sha256": d.split(":")[1]}} for p, d in sorted(platforms.items())
           if d != subject_digest],
        "predicateType": PREDICATE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {"image": spec.name, "spec": f"images/{spec.chain[0]}/image.yaml",
                                       "lock": f"lockfiles/{spec.lock_name}.lock", "platforms": sorted(platforms),
                                       **(parameters or {})},
                "internalParameters": {"enginebuild": __version__},
                "resolvedDependencies": files + dependencies(lock, f"lockfiles/{spec.lock_name}.lock"),
            },
            "runDetails": {"builder": {"id": builder, "version": {"enginebuild": __version__}},
                           "metadata": metadata,
                           **({"byproducts": [{"name": "sbom.cdx.json", "digest": {"sha256": sbom},
                                               "mediaType": "application/vnd.cyclonedx+json"}]} if sbom else {})},
        },
    }
    return json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
