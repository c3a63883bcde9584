"""Locking an image: every input of its spec resolved into lockfiles/<image>.lock, pins of
unchanged requests kept (unless `update`), the lock replaced atomically and only when it
changes. The same steps serve `lock` and `image` (which locks first only what the spec asks for
and the lock lacks, as `cargo build` updates Cargo.lock, and refuses to write a lock that
would leave a new input unpinned)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from enginebuild.errors import LockError, LockWouldChange, command
from enginebuild.io.progress import output
from enginebuild.lock.lockfile import input_where, stale_inputs, write_lock
from enginebuild.lock.resolve import HINT, Resolvers, build_lock
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.lock.lockfile import Lock
    from enginebuild.lock.resolve import Resolvers
    from enginebuild.recipe.model import ImageSpec


@dataclass(frozen=True)
class Locked:
    """What locking one image did."""

    spec: ImageSpec
    lock: Lock | None  # None: nothing was stale (`stale_only`), the lock was not read again
    path: str  # lockfiles/<lock name>.lock, relative to the checkout
    written: bool
    stale: tuple[str, ...]  # the inputs the lock lacked or pinned for another request
    unresolved: dict[str, str]  # inputs the lock leaves unpinned, with why


def lock_image(ws: Workspace, name: str, resolvers: Resolvers | None = None, *, update: bool = False,
               stale_only: bool = False) -> Locked:
    """Resolve `name`'s inputs into its lock. `stale_only` (before a build): nothing happens unless
    the spec asks for inputs the lock does not pin, and a lock that would leave one of those
    unpinned is not written (LockError naming its spec line). Each input resolved anew, or kept
    after a failure, is said as it goes."""

    spec = ws.spec(name)
    path = f"lockfiles/{spec.lock_name}.lock"
    with ws.state_mutex():
        previous = ws.lock(spec)
        stale = tuple(inp for inp, _ in stale_inputs(spec, previous))
        if stale_only and not stale:
            return Locked(spec, None, path, False, (), {})

        def report(inp: str, status: str, detail: str) -> None:
            if status == "kept-after-failure":
                output().say(f"  {name}: {inp}: could not be resolved again, kept the previous pin ({detail})")
            elif status not in ("kept", "same"):
                output().say(f"  {name}: {inp}: {status}" + (f" ({detail})" if detail else ""))

        lock = build_lock(resolvers or Resolvers(ws.home, mirrors=ws.mirrors), spec, previous, update=update and not stale_only,
                          report=report)
        unresolved = lock.unresolved()
        if stale_only:
            before = previous.unresolved() if previous is not None else {}
            failed = {inp: why for inp, why in unresolved.items() if inp not in before}
            if failed:  # nothing written: the lock stays as it was

                inp, why = next(iter(failed.items()))
                said, _, own = why.partition(HINT)  # the resolver's own hint, where it gave one, says what to do
                raise LockError(f"{input_where(spec, inp)}: {name}: {inp} could not be locked before building: {said}",
                                hint=own or f"run `{command()} lock {name}` where its source is reachable")
        written = previous is None or previous.to_json() != lock.to_json() or bool(previous.migrated_from)
        if written:
            write_lock(ws.root, spec, lock)
    return Locked(spec, lock, path, written, stale, unresolved)


def lock_first(ws: Workspace, names: list[str], strict: bool) -> None:
    """Inputs the spec asks for and the lock does not pin: locked first (only those), or, with
    --locked/--frozen, refused naming them."""

    for name in names:
        spec = ws.spec(name)
        stale = stale_inputs(spec, ws.lock(spec))
        if not stale:
            continue
        if strict:
            first = stale[0][0]
            where = input_where(spec, first)
            raise LockWouldChange(f"{where}: {name}: the lock would change: "
                                  + "; ".join(f"{inp}: {why}" for inp, why in stale),
                                  hint=f"run `{command()} lock {name}` and commit lockfiles/{spec.lock_name}.lock, "
                                       "or build without --locked/--frozen")
        locked = lock_image(ws, name, stale_only=True)
        if locked.stale:  # on stderr, as cargo says "Locking": stdout stays the verb's own (plan --json)
            output().say(f"{name}: locked {', '.join(locked.stale)} into {locked.path}")
