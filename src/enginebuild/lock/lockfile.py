"""Lockfiles: every floating input of an image, resolved to a typed pin, in lockfiles/<name>.lock.

Each input records the `request` (what the spec asked for) and what it `resolved` to (or
why it could not be resolved where `lock` ran). A lock is stale when a request differs
from the spec's: that test needs no network. Format 1 locks are migrated on read: entries
whose request has the same shape keep their pins; the rest are re-resolved by `lock`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.errors import LockError, Where, command
from enginebuild.lock.inputs import Input, P, image_inputs
from enginebuild.lock.pins import ToolPin
from enginebuild.recipe.model import ImageSpec
from enginebuild.sources import Pinned, Source
from enginebuild.wire import JsonDoc, Parsed

FORMAT = 2
_CHECKS = {
    "sha256": (re.compile(r"[0-9a-f]{64}"), "64 hex digits"),
    "commit": (re.compile(r"[0-9a-f]{40}"), "40 hex digits"),
    "digest": (re.compile(r"sha256:[0-9a-f]{64}"), "sha256:<64 hex>"),
    "index_digest": (re.compile(r"sha256:[0-9a-f]{64}"), "sha256:<64 hex>"),
}


@dataclass
class Entry:
    request: JsonDoc
    resolved: JsonDoc | None
    unresolved: str | None = None

    def to_json(self) -> JsonDoc:
        body: JsonDoc = {"request": self.request, "resolved": self.resolved}
        if self.unresolved:
            body["unresolved"] = self.unresolved
        return body


@dataclass
class Lock:
    image: str
    created: str
    entries: dict[str, Entry] = field(default_factory=dict)
    migrated_from: int | None = None

    def to_json(self) -> bytes:
        doc = {"enginebuild-lock": FORMAT, "image": self.image, "created": self.created,
               "inputs": {n: e.to_json() for n, e in sorted(self.entries.items())}}
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()

    def raw(self, name: str) -> JsonDoc | None:
        entry = self.entries.get(name)
        return entry.resolved if entry else None

    def tool(self, name: str) -> ToolPin | None:
        """The host tool the lock pins as `tools.NAME` (cuobjdump), or None."""
        data = self.raw(f"tools.{name}")
        return ToolPin.from_json(data) if data else None

    def pin(self, inp: Input[P]) -> P | None:
        """The typed pin of an input, or None when the lock does not resolve it."""
        data = self.raw(inp.name)
        return inp.decode(data) if data is not None else None

    def source_pin(self, source: Source, name: str) -> Pinned:
        """A source as the lock pins it under input `name` (components.X.source, overlays.X.source,
        ...): unpinned where the lock does not resolve it or nothing pins it."""
        entry = self.entries.get(name)
        if not source.pinned_by_lock or entry is None or entry.resolved is None:
            return Pinned(source, None)
        return source.pin_from_json(entry.resolved)

    def unresolved(self) -> dict[str, str]:
        return {n: e.unresolved or "not resolved" for n, e in self.entries.items() if e.resolved is None}

    def blocked(self) -> dict[str, str]:
        """Every input that keeps the image from being built here, with the reason: unresolved
        ones, and pins resolved only in part (their note says what could not be read). One
        answer for list, lock --check, plan, render, image and changed."""
        out = self.unresolved()
        for name, entry in sorted(self.entries.items()):
            note = (entry.resolved or {}).get("note")
            if note and name not in out:
                out[name] = str(note)
        return out


def lock_path(root: Path, lock_name: str) -> Path:
    return root / "lockfiles" / f"{lock_name}.lock"


def _check_pins(node: Parsed, key: str = "") -> str | None:
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
    elif key in _CHECKS and node is not None and node != "":
        pattern, what = _CHECKS[key]
        if not (isinstance(node, str) and pattern.fullmatch(node)):
            return f"{key} {node!r} is not {what}"
    return None


def read_lock(root: Path, spec: ImageSpec) -> Lock | None:
    return read_lock_file(lock_path(root, spec.lock_name), f"lockfiles/{spec.lock_name}.lock", spec)


def read_lock_file(path: Path, display: str, spec: ImageSpec) -> Lock | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise LockError(f"{display}: not valid JSON ({exc})",
                        hint=f"restore it with `git checkout -- {display}`, or delete it and run "
                             f"`{command()} lock {spec.name}` to resolve every input again") from None
    if not isinstance(doc, dict) or doc.get("enginebuild-lock") not in (1, FORMAT):
        raise LockError(f"{display}: not an enginebuild lockfile (format {FORMAT})",
                        hint=f"delete it and run `{command()} lock {spec.name}`")
    if doc.get("image") != spec.name:
        raise LockError(f"{display}: this lock is for image {doc.get('image')!r}, not {spec.name!r}",
                        hint=f"it was copied from another image; delete it and run `{command()} lock {spec.name}`")
    if not isinstance(doc.get("inputs"), dict) or not isinstance(doc.get("created"), str):
        raise LockError(f"{display}: malformed (created or inputs missing)",
                        hint=f"delete it and run `{command()} lock {spec.name}`")
    entries = {}
    for name, entry in doc["inputs"].items():
        if not isinstance(entry, dict) or "request" not in entry:
            raise LockError(f"{display}: inputs.{name}: malformed entry")
        problem = _check_pins(entry.get("resolved"))
        if problem:
            raise LockError(f"{display}: inputs.{name}: {problem}",
                            hint=f"run `{command()} lock {spec.name} --update` to resolve it again")
        entries[name] = Entry(entry["request"], entry.get("resolved"), entry.get("unresolved"))
    lock = Lock(spec.name, doc["created"], entries)
    if doc["enginebuild-lock"] == 1:
        return migrate_v1(lock, spec)
    return lock


def migrate_v1(lock: Lock, spec: ImageSpec) -> Lock:
    """Format 1 named inputs base/system/python/engine/vendor.X/plugin.X. An entry is kept, under its
    new name, exactly when a format-2 input asks for the same thing (the same request): under each
    such name (two components may pin the same source, as vLLM's kernels and package do)."""
    wanted = [(inp.name, inp.request()) for inp in image_inputs(spec)]
    entries = {}
    for entry in lock.entries.values():
        for name, request in wanted:
            if request == entry.request and name not in entries:
                resolved = {k: v for k, v in entry.resolved.items() if k != "kind"} if entry.resolved else None
                entries[name] = Entry(request, resolved, entry.unresolved)
    return Lock(lock.image, lock.created, entries, migrated_from=1)


def write_lock(root: Path, spec: ImageSpec, lock: Lock) -> None:
    from enginebuild.io.files import write_atomic

    write_atomic(lock_path(root, spec.lock_name), lock.to_json())


def input_where(spec: ImageSpec, name: str) -> Where:
    """The spec line an input (or the missing lockfile, named "lockfile") comes from."""
    if name == "lockfile":
        return spec.where("base")
    key = name.split("@")[0]
    return spec.where(key.removeprefix("runtime.") if key.startswith("runtime.") else key.rsplit(".", 1)[0])


def stale_inputs(spec: ImageSpec, lock: Lock | None) -> list[tuple[str, str]]:
    """(input, why) for each input whose lock entry does not match the spec; empty when fresh."""
    if lock is None:
        return [("lockfile", f"lockfiles/{spec.lock_name}.lock does not exist")]
    wanted = {inp.name: inp for inp in image_inputs(spec)}
    problems = []
    if lock.migrated_from:
        problems.append(("lockfile", f"format {lock.migrated_from}; `lock` rewrites it as format {FORMAT}"))
    for name, inp in wanted.items():
        entry = lock.entries.get(name)
        if entry is None:
            problems.append((name, "not in the lock"))
        elif entry.request != inp.request():
            problems.append((name, describe_change(entry.request, inp.request())))
    for name in lock.entries:
        if name not in wanted:
            problems.append((name, "in the lock but no longer in the spec"))
    return problems


def describe_change(old: object, new: object) -> str:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                return f"{key} changed from {json.dumps(old.get(key))} to {json.dumps(new.get(key))}"
    return f"changed from {json.dumps(old)} to {json.dumps(new)}"
