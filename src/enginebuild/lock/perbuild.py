"""Per-build locks: a `--set` that changes a pinned input (a base, a git ref, a package version)
is resolved for that run, as `docker build --build-arg REF=…` builds another ref, into a lock
of its own in the store (content-addressed, written atomically); the committed lock is never
touched. Every verb reads it the same way, so `plan`, `render` and `image` agree."""

from __future__ import annotations

import hashlib
from pathlib import Path

from enginebuild.errors import LockError, command
from enginebuild.io.files import write_atomic
from enginebuild.io.progress import output
from enginebuild.lock.lockfile import Lock, input_where, read_lock_file, stale_inputs
from enginebuild.lock.resolve import Resolvers, build_lock
from enginebuild.spec.model import ImageSpec


def per_build_lock(home: Path, spec: ImageSpec, committed: Lock | None, settings: tuple[str, ...]) -> Lock | None:
    """The committed lock with the inputs `--set` changed resolved for this build (only those),
    or the committed lock itself when `--set` changed no input."""

    stale = stale_inputs(spec, committed)
    if not stale or committed is None:
        return committed
    lock = build_lock(Resolvers(home), spec, committed, update=False)
    before = committed.unresolved()
    failed = {inp: why for inp, why in lock.unresolved().items() if inp not in before}
    if failed:
        inp, why = next(iter(failed.items()))
        raise LockError(f"{input_where(spec, inp)}: --set {', '.join(settings)}: {inp} could not be resolved for "
                        f"this build: {why}", hint="check the value, and that its source is reachable from here")
    data = lock.to_json()
    path = home / "locks" / f"{spec.lock_name}-{hashlib.sha256(data).hexdigest()[:16]}.lock"
    if not path.exists():
        write_atomic(path, data)
    output().say(f"{spec.name}: --set changes {', '.join(inp for inp, _ in stale)}: resolved for this build into "
                 f"{path} (lockfiles/{spec.lock_name}.lock is not touched; `{command()} lock` pins it for good)")
    again = read_lock_file(path, str(path), spec)
    assert again is not None
    return again
