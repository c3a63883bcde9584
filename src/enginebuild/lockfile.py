"""Lockfiles: every floating input of an image, resolved to a pin, under lockfiles/<name>.lock.

Each input records the `request` (what the spec asked for) and what it `resolved` to.
A lock is stale when a request differs from the spec's: that test needs no network.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from enginebuild.atomic import write_atomic
from enginebuild.errors import LockError
from enginebuild.spec import ImageSpec, Source

FORMAT = 1
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX40 = re.compile(r"[0-9a-f]{40}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def source_request(source: Source) -> dict:
    if source.kind == "git":
        return {"kind": "git", "url": source.url, "ref": source.ref}
    if source.kind == "pypi":
        return {"kind": "pypi", "name": source.name, "version": source.version}
    return {"kind": "path"}


def requests_for(spec: ImageSpec) -> dict:
    """What each floating input of the spec asks for, keyed by input name."""
    out: dict = {"base": {"ref": spec.base, "platform": spec.platform}} if spec.base else {}
    if spec.system and spec.system.packages:
        s = spec.system
        out["system"] = {"packages": sorted(s.packages), "archive": s.archive_url, "suite": s.suite,
                         "components": list(s.components), "arch": spec.arch, "install": s.install}
    if spec.python and spec.python.requirements:
        p = spec.python
        out["python"] = {"requirements": list(p.requirements), "index": p.index, "python": p.version,
                         "arch": spec.arch}
    engine = spec.engine
    # an overlay's source only matters to check its patches against
    if engine and engine.source.kind != "path" and (not engine.overlay or spec.patches):
        out["engine"] = source_request(engine.source)
    for vendor in engine.vendor if engine else ():
        if vendor.source.kind != "path":
            out[f"vendor.{vendor.name}"] = source_request(vendor.source)
    for plugin in spec.plugins:
        if plugin.source.kind != "path":
            out[f"plugin.{plugin.name}"] = source_request(plugin.source)
    return out


@dataclass
class Lock:
    image: str
    created: str
    inputs: dict  # name -> {"request": ..., "resolved": ... | None, "unresolved": str?}

    def to_json(self) -> bytes:
        doc = {"enginebuild-lock": FORMAT, "image": self.image, "created": self.created, "inputs": self.inputs}
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()

    def resolved(self, name: str):
        entry = self.inputs.get(name) or {}
        return entry.get("resolved")

    def unresolved(self) -> dict:
        return {n: e.get("unresolved", "not resolved") for n, e in self.inputs.items() if e.get("resolved") is None}


def lock_path(root: Path, image: str) -> Path:
    return root / "lockfiles" / f"{image}.lock"


def read_lock(root: Path, image: str) -> Lock | None:
    path = lock_path(root, image)
    display = f"lockfiles/{image}.lock"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise LockError(f"{display}: not valid JSON ({exc})",
                        hint=f"restore it from git or run `python BUILD.py lock {image}`") from None
    if not isinstance(doc, dict) or doc.get("enginebuild-lock") != FORMAT:
        raise LockError(f"{display}: not an enginebuild lockfile of format {FORMAT}")
    if doc.get("image") != image or not isinstance(doc.get("inputs"), dict) or not isinstance(doc.get("created"), str):
        raise LockError(f"{display}: malformed (image, created or inputs missing)")
    for name, entry in doc["inputs"].items():
        if not isinstance(entry, dict) or "request" not in entry:
            raise LockError(f"{display}: inputs.{name}: malformed entry")
        problem = _check_pins(entry.get("resolved"))
        if problem:
            raise LockError(f"{display}: inputs.{name}: {problem}",
                            hint=f"run `python BUILD.py lock {image}` to resolve it again")
    return Lock(image=image, created=doc["created"], inputs=doc["inputs"])


def _check_pins(node, key: str = "") -> str | None:
    """Every pin in a lock is well formed: a tampered or hand-edited lock is refused."""
    if isinstance(node, dict):
        for k, v in node.items():
            problem = _check_pins(v, k)
            if problem:
                return problem
    elif isinstance(node, list):
        for item in node:
            problem = _check_pins(item, key)
            if problem:
                return problem
    elif key == "sha256" and not (isinstance(node, str) and _HEX64.fullmatch(node)):
        return f"sha256 {node!r} is not 64 hex digits"
    elif key == "commit" and not (isinstance(node, str) and _HEX40.fullmatch(node)):
        return f"commit {node!r} is not 40 hex digits"
    elif key == "digest" and node is not None and not (isinstance(node, str) and _DIGEST.fullmatch(node)):
        return f"digest {node!r} is not sha256:<64 hex>"
    return None


def write_lock(root: Path, lock: Lock) -> None:
    write_atomic(lock_path(root, lock.image), lock.to_json())


def stale_inputs(spec: ImageSpec, lock: Lock | None) -> list:
    """(input, why) for each input whose lock entry does not match the spec; empty when fresh."""
    if lock is None:
        return [("lockfile", f"lockfiles/{spec.name}.lock does not exist")]
    wanted = requests_for(spec)
    problems = []
    for name, request in wanted.items():
        entry = lock.inputs.get(name)
        if entry is None:
            problems.append((name, "not in the lock"))
        elif entry["request"] != request:
            problems.append((name, _describe_change(entry["request"], request)))
    for name in lock.inputs:
        if name not in wanted:
            problems.append((name, "in the lock but no longer in the spec"))
    return problems


def _describe_change(old, new) -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                return f"{key} changed from {json.dumps(old.get(key))} to {json.dumps(new.get(key))}"
    return f"changed from {json.dumps(old)} to {json.dumps(new)}"
