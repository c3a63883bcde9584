"""Resolve every floating input (base tag, git ref, requirements, sdists, .debs) into
lockfiles/<image>.lock. Inputs whose request is unchanged keep their pins unless --update.
With --check: no network; exit 1 when a lock is missing or stale, naming the input."""
from __future__ import annotations

import sys

from enginebuild.errors import EXIT_FAILED


def add_arguments(parser):
    parser.add_argument("images", nargs="*", metavar="IMAGE", help="images to lock (default: all)")
    parser.add_argument("--check", action="store_true", help="verify locks against the specs, offline")
    parser.add_argument("--update", action="store_true", help="re-resolve every input, even unchanged ones")
    parser.add_argument("--locked", action="store_true",
                        help="resolve nothing: exit 2 naming the spec line of any input the lock does not pin")


def run(args, ws) -> int:
    names = ws.select(args.images)
    if args.locked:
        return _locked(ws, names)
    if args.check:
        return _check(ws, names)
    from enginebuild.lockfile import write_lock
    from enginebuild.locker import Resolvers, build_lock

    resolvers = Resolvers(ws.home)
    failed = False
    with ws.state_lock():
        for name in names:
            spec = ws.spec(name)
            previous = ws.lock(name)

            def report(inp, status, detail, name=name):
                if status != "kept":
                    line = f"  {name}: {inp}: {status}" + (f" ({detail})" if detail else "")
                    print(line, file=sys.stderr)

            lock = build_lock(resolvers, spec, previous, update=args.update, report=report)
            if previous is None or previous.to_json() != lock.to_json():
                write_lock(ws.root, lock)
                print(f"{name}: wrote lockfiles/{name}.lock")
            else:
                print(f"{name}: lockfiles/{name}.lock is up to date")
            for inp, why in lock.unresolved().items():
                failed = True
                print(f"{name}: {inp} is NOT pinned: {why}", file=sys.stderr)
    if failed:
        print("some inputs could not be resolved here; `image` refuses to build those images until "
              "`lock` runs where their sources are reachable", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _locked(ws, names) -> int:
    """Like a build would: every input pinned by the lock as it is, or a bad-input error."""
    from enginebuild.stages import check_lock_for_build

    for name in names:
        check_lock_for_build(ws.spec(name), ws.lock(name))
        print(f"{name}: every input is pinned")
    return 0


def _check(ws, names) -> int:
    from enginebuild.lockfile import stale_inputs

    bad = 0
    for name in names:
        spec = ws.spec(name)
        lock = ws.lock(name)
        problems = stale_inputs(spec, lock)
        if problems:
            bad += 1
            for inp, why in problems:
                print(f"{name}: STALE {inp}: {why}")
        else:
            unresolved = lock.unresolved()
            note = f" ({len(unresolved)} input(s) recorded as not resolvable here)" if unresolved else ""
            print(f"{name}: ok{note}")
    if bad:
        print(f"{bad} lock(s) stale or missing; run `python BUILD.py lock` and commit lockfiles/", file=sys.stderr)
        return EXIT_FAILED
    return 0
