"""Per-build locks: a `--set` that changes a pinned input (a base, a git ref, a package version)
is resolved for that run, as `docker build --build-arg REF=…` builds another ref, into a lock
of its own in the store (written atomically); the committed lock is never touched. The lock is
named by the committed lock and the changed inputs' requests, so every command given the same
`--set` over the same committed lock reads the one resolution made first (`plan` then `image`
build on the same digest even if a tag moved between them); only the inputs the `--set` changed
are resolved (one the committed lock leaves unresolved stays so). `gc` removes those made over
another committed lock than the one there now."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild.errors import LockError, command
from enginebuild.io.files import write_atomic
from enginebuild.io.progress import output
from enginebuild.lock.inputs import image_inputs
from enginebuild.lock.lockfile import Lock, input_where, read_lock_file, stale_inputs
from enginebuild.lock.resolve import Resolvers, build_lock
from enginebuild.recipe.model import ImageSpec

if TYPE_CHECKING:
    from enginebuild.io.git import Mirrors


def committed_key(committed: Lock) -> str:
    return hashlib.sha256(committed.to_json()).hexdigest()[:16]


def lock_path_for(home: Path, spec: ImageSpec, committed: Lock, stale: list[tuple[str, str]]) -> Path:
    """Where the per-build lock of these changes over this committed lock lives."""
    requests = {inp.name: inp.request() for inp in image_inputs(spec) if inp.name in {n for n, _ in stale}}
    asked = hashlib.sha256(json.dumps(requests, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return home / "locks" / f"{spec.lock_name}-{committed_key(committed)}-{asked}.lock"


def per_build_lock(home: Path, spec: ImageSpec, committed: Lock | None, settings: tuple[str, ...],
                   mirrors: Mirrors = ()) -> Lock | None:
    """The committed lock with the inputs `--set` changed resolved for this build (only those),
    or the committed lock itself when `--set` changed no input."""

    stale = stale_inputs(spec, committed)
    if not stale or committed is None:
        return committed
    path = lock_path_for(home, spec, committed, stale)
    if path.exists():
        again = read_lock_file(path, str(path), spec)
        if again is not None:
            output().say(f"{spec.name}: --set changes {', '.join(inp for inp, _ in stale)}: the resolution made for it "
                         f"earlier is used ({path}; `{command()} gc` removes it once the committed lock changes)")
            return again
    lock = build_lock(Resolvers(home, mirrors=mirrors), spec, committed, update=False, keep_unresolved=True)
    before = committed.unresolved()
    changed = {inp for inp, _ in stale}
    failed = {inp: why for inp, why in lock.unresolved().items() if inp not in before or inp in changed}
    if failed:  # an input the --set changed is never said to be resolved while it is not
        inp, why = next(iter(failed.items()))
        also = " (the committed lock leaves it unresolved too)" if inp in before else ""
        raise LockError(f"{input_where(spec, inp)}: --set {', '.join(settings)}: {inp} could not be resolved for "
                        f"this build{also}: {why}", hint="check the value, and that its source is reachable from here")
    write_atomic(path, lock.to_json())
    output().say(f"{spec.name}: --set changes {', '.join(inp for inp, _ in stale)}: resolved for this build into "
                 f"{path} (lockfiles/{spec.lock_name}.lock is not touched; `{command()} lock` pins it for good)")
    again = read_lock_file(path, str(path), spec)
    assert again is not None
    return again
