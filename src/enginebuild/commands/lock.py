"""Resolve every floating input (base tags, git refs, Python requirements, sdists, .debs) into
lockfiles/<image>.lock. Inputs whose request is unchanged keep their pins unless --update; an
input that fails to resolve again keeps its previous pin (and says so).
With --check: no network; exit 1 when a lock is missing or stale, naming the input.
With --locked: resolve nothing; exit 2 naming the spec line of any input the lock does not pin.
With --routes: also learn what lockfiles/<image>.routes.json lacks (which files the builds its
patches applied as files stand on install verbatim: those components are built or fetched, no
image is made), as `image` does before it builds."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from enginebuild.errors import EXIT_FAILED, command
from enginebuild.io.progress import output
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.lock.lockfile import Lock
    from enginebuild.recipe.model import ImageSpec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="*", metavar="IMAGE", help="images to lock (default: all, with variants)")
    parser.add_argument("--check", action="store_true", help="verify locks against the specs, offline")
    parser.add_argument("--buildable", action="store_true",
                        help="with --check: also fail (exit 1) for an image this machine cannot build, naming "
                             "the input it cannot resolve (a CI gate for the images CI builds)")
    parser.add_argument("--update", action="store_true", help="re-resolve every input, even unchanged ones")
    parser.add_argument("--locked", action="store_true",
                        help="resolve nothing: exit 2 naming the spec line of any input the lock does not pin")
    parser.add_argument("--routes", action="store_true",
                        help="also learn what lockfiles/IMAGE.routes.json lacks: the components that patches "
                             "applied as files stand on are built (or fetched) and read; no image is made")
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH",
                        help="with --routes: the platforms to learn for (default: the spec's)")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.errors import UserError

    if ws.overrides:
        raise UserError("--set changes a spec for one run; it is never written to a lock (use it with image/plan)")
    names = ws.select(args.images)
    if args.locked:
        return _locked(ws, names)
    if args.check:
        return _check(ws, names, [] if args.images else list(ws.broken()), args.buildable)
    from enginebuild.lock.resolve import Resolvers
    from enginebuild.usecases.locking import lock_image

    ws.sweep()
    resolvers = Resolvers(ws.home, mirrors=ws.mirrors)
    failed = False
    for name in names:
        locked = lock_image(ws, name, resolvers, update=args.update)
        print(f"{name}: wrote {locked.path}" if locked.written else f"{name}: {locked.path} is up to date")
        assert locked.lock is not None
        for inp, why in locked.lock.blocked().items():  # what plan and image call not buildable, the same
            failed = True
            pinned = "NOT pinned" if inp in locked.unresolved else "pinned only in part"
            output().say(f"{name}: {inp} is {pinned}: {why}")
        lint_kernels(ws, locked.spec, locked.lock)
        if args.routes and not locked.lock.blocked():
            from enginebuild.usecases.learning import learn_image

            moved = learn_image(ws, name, args.platform)
            print(f"{name}: the routes of its patches are known (lockfiles/{locked.spec.lock_name}.routes.json)"
                  if not moved else
                  f"{name}: a patch goes into its component's build on {', '.join(moved)} (the routes file says why)")
    if failed:
        output().say("some inputs could not be resolved here; `image` refuses to build those images until "
                     "`lock` runs where their sources are reachable")
        return EXIT_FAILED
    return 0


def lint_kernels(ws: Workspace, spec: ImageSpec, lock: Lock) -> None:
    """Binary wheels the image installs, against its cuda-archs: flagged before any build. Advice
    only: where the wheels or the pinned cuobjdump cannot be fetched (offline), it says so and the
    lock stands (the build's own kernel check still runs)."""
    from enginebuild.errors import FetchError
    from enginebuild.io.store import Store
    from enginebuild.kernels.wheels import lint_wheels

    try:
        reports = lint_wheels(spec, lock, Store(ws.home))
    except FetchError as exc:
        output().say(f"{spec.name}: note: kernel check of its binary wheels skipped: {exc.message.splitlines()[0]}")
        return
    for report in reports:
        output().say(f"{spec.where('python.requirements')}: warning: {report.where}: {report.describe()}; "
                     f"`image` will fail its kernel check")


def _locked(ws: Workspace, names: list[str]) -> int:
    """Like a build would: every input pinned by the lock as it is, or a bad-input error."""
    from enginebuild.plan.image import check_lock_for_build

    for name in names:
        spec = ws.spec(name)
        check_lock_for_build(spec, ws.lock(spec))
        print(f"{name}: every input is pinned")
    return 0


def _check(ws: Workspace, names: list[str], broken: list[str], buildable: bool) -> int:
    from enginebuild.lock.lockfile import stale_inputs

    bad = len(broken)  # each named already, by `select`
    unbuildable = 0
    for name in names:
        spec = ws.spec(name)
        lock = ws.lock(spec)
        problems = stale_inputs(spec, lock)
        if problems:
            bad += 1
            for inp, why in problems:
                print(f"{name}: STALE {inp}: {why}")
        else:
            assert lock is not None
            blocked = lock.blocked()
            if not blocked:
                print(f"{name}: ok")
                continue
            first, why = next(iter(blocked.items()))
            print(f"{name}: the lock matches the spec, but {name} is NOT buildable here: {len(blocked)} input(s) "
                  f"not resolvable here ({first}: {why})")
            unbuildable += 1
    if bad:
        output().say(f"{bad} image(s) with a broken spec or a stale or missing lock; fix the spec, run "
                     f"`{command()} lock` and commit lockfiles/")
        return EXIT_FAILED
    if unbuildable and buildable:
        output().say(f"{unbuildable} image(s) not buildable here (--buildable): their inputs must be resolved "
                     "where their sources are reachable")
        return EXIT_FAILED
    return 0
