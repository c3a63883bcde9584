"""The provenance of a pushed image: an in-toto Statement (v1) with a SLSA provenance (v1)
predicate. The build definition is the spec and the lock (their sha256); the resolved
dependencies are every pin of the lock; the builder is this machine, or the GitHub Actions
workflow run that pushed it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from enginebuild import __version__
from enginebuild.lock.lockfile import Lock
from enginebuild.spec.model import ImageSpec

STATEMENT = "https://in-toto.io/Statement/v1"
PREDICATE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://enginebuild.dev/buildtypes/image/v1"


def _file(root: Path, rel: str) -> dict[str, Any]:
    return {"uri": rel, "digest": {"sha256": hashlib.sha256((root / rel).read_bytes()).hexdigest()}}


def dependencies(lock: Lock) -> list[dict[str, Any]]:
    out = []
    for name, entry in sorted(lock.entries.items()):
        pin = entry.resolved
        if pin is None:
            continue
        if ".system@" in name:
            out += [{"name": f"{name}/{d['name']}", "uri": f"{pin['archives'][d.get('archive', 0)]}/{d['filename']}",
                     "digest": {"sha256": d["sha256"]}} for d in pin["packages"]]
        elif ".python@" in name:
            for d in pin["packages"]:
                digest = {"sha256": d["sha256"]} if d.get("sha256") else {"gitCommit": d["commit"]} if d.get("commit") \
                    else {}
                if digest:
                    out.append({"name": f"{name}/{d['name']}", "uri": d.get("url") or d["name"], "digest": digest})
        elif ".base@" in name and pin.get("digest"):
            out.append({"name": name, "uri": pin["ref"], "digest": {"sha256": pin["digest"].split(":")[1]}})
        elif "commit" in pin:
            out.append({"name": name, "uri": f"git+{pin['url']}", "digest": {"gitCommit": pin["commit"]}})
        elif "files" in pin:  # a host tool
            out += [{"name": f"{name}/{m}", "uri": f["url"], "digest": {"sha256": f["sha256"]}}
                    for m, f in sorted(pin["files"].items())]
        elif "sha256" in pin:
            out.append({"name": name, "uri": pin.get("url", name), "digest": {"sha256": pin["sha256"]}})
    return out


def builder_id() -> tuple[str, dict[str, Any]]:
    server, repo, run = (os.environ.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server and repo and run:
        workflow = os.environ.get("GITHUB_WORKFLOW_REF", "")
        return f"{server}/{workflow or repo}", {"invocationId": f"{server}/{repo}/actions/runs/{run}"}
    return "https://enginebuild.dev/builders/local", {}


def make_provenance(root: Path, spec: ImageSpec, lock: Lock, repository: str, subject_digest: str,
                    platforms: dict[str, str]) -> bytes:
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
                                       "lock": f"lockfiles/{spec.lock_name}.lock", "platforms": sorted(platforms)},
                "internalParameters": {"enginebuild": __version__},
                "resolvedDependencies": files + dependencies(lock),
            },
            "runDetails": {"builder": {"id": builder, "version": {"enginebuild": __version__}},
                           "metadata": metadata},
        },
    }
    return json.dumps(statement, sort_keys=True, separators=(",", ":")).encode()
