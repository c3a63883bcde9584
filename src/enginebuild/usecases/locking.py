"""Locking as a step of building: what the spec asks for and the lock lacks is resolved before
a build (only those inputs), as `cargo build` updates Cargo.lock."""

from __future__ import annotations

from enginebuild.errors import command
from enginebuild.io.progress import output
from enginebuild.workspace import Workspace


def relock(ws: Workspace, name: str) -> None:
    """What `image` does before building when the spec asks for inputs the lock does not pin
    (as `cargo build` updates Cargo.lock): resolve those inputs only, keep every other pin as
    it is, say what was pinned, write the lock atomically."""
    from enginebuild.lock.lockfile import input_where, stale_inputs, write_lock
    from enginebuild.lock.resolve import Resolvers, build_lock

    spec = ws.spec(name)
    with ws.state_mutex():
        previous = ws.lock(spec)
        stale = stale_inputs(spec, previous)
        if not stale:
            return

        def report(inp: str, status: str, detail: str) -> None:
            if status not in ("kept", "same"):
                output().say(f"  {name}: {inp}: {status}" + (f" ({detail})" if detail else ""))

        lock = build_lock(Resolvers(ws.home), spec, previous, update=False, report=report)
        before = previous.unresolved() if previous is not None else {}
        failed = {inp: why for inp, why in lock.unresolved().items() if inp not in before}
        if failed:  # nothing written: the lock stays as it was
            from enginebuild.errors import LockError

            inp, why = next(iter(failed.items()))
            raise LockError(f"{input_where(spec, inp)}: {name}: {inp} could not be locked before building: {why}",
                            hint=f"run `{command()} lock {name}` where its source is reachable")
        write_lock(ws.root, spec, lock)
        # on stderr, as cargo says "Locking": stdout stays the verb's own (plan --json)
        output().say(f"{name}: locked {', '.join(inp for inp, _ in stale)} into lockfiles/{spec.lock_name}.lock")
