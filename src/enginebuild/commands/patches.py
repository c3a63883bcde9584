"""Check patch stacks against the exact engine source each image pins, without compiling:
per patch, applies (with offsets), already upstream, obsolete (its header says upstream
fixed it at or before the pinned version) or conflicts (file, hunk, what the source has
instead). With --engine, check against another version or ref without touching the lock.
Exit 1 when any patch is not `applies`."""
from __future__ import annotations

import json
import sys

from enginebuild.errors import EXIT_FAILED, UserError


def add_arguments(parser):
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    check = sub.add_parser("check", help="check patch stacks", description=__doc__.strip())
    check.add_argument("images", nargs="*", metavar="IMAGE")
    check.add_argument("--all", action="store_true", help="every image of the catalogue that has a patch stack")
    check.add_argument("--engine", metavar="REF_OR_VERSION",
                       help="check the engine's stack against this version (sdist) or git ref instead of the lock's pin; "
                            "`latest` is the newest release (upstream HEAD for git sources)")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.add_argument("--strict", action="store_true",
                       help="exit 1 also when a stack could not be checked (its source is not pinned where this runs)")


def run(args, ws) -> int:
    from enginebuild.patches.check import check_stack
    from enginebuild.patches.targets import stack_targets

    if not args.images and not args.all:
        raise UserError("name images to check, or --all")
    names = ws.select(args.images) if args.images else ws.buildable()
    report, failed, unchecked = [], False, []
    for name in names:
        spec = ws.spec(name)
        if args.engine and spec.engine and spec.engine.source.kind == "path" and not args.images:
            print(f"{name}: not checked against --engine {args.engine}: its engine source is a folder of this "
                  "repository", file=sys.stderr)
            continue
        for target in stack_targets(ws.home, spec, ws.lock(name), engine_ref=args.engine):
            if target.tree is None:
                unchecked.append(target)
                report.append((target, []))
                continue
            results = check_stack(target.patches, target.tree, is_ancestor=target.is_ancestor)
            failed |= any(not r.ok for r in results)
            report.append((target, results))
    if args.json:
        print(json.dumps([{"image": t.image, "component": t.component, "source": t.description,
                           "override": t.override, "checked": t.tree is not None, "unchecked_because": t.unchecked,
                           "patches": [r.to_json() for r in results] if t.tree is not None else
                           [{"name": p.name, "sha256": p.sha256, "subject": p.subject, "status": "not-checked"}
                            for p in t.patches]}
                          for t, results in report], indent=2))
    else:
        for target, results in report:
            note = " (--engine: the lock is not touched)" if target.override else ""
            print(f"{target.image}: {target.component} {target.description}{note}")
            if target.tree is None:
                for patch in target.patches:
                    print(f"  {'NOT CHECKED':<17} {patch.name}  its source is not pinned here: {target.unchecked}")
            for result in results:
                print(f"  {result.status:<17} {result.name}  {result.detail}")
                if result.status == "conflicts":
                    _show_conflict(result.conflict)
        if not report:
            print("no image has a patch stack", file=sys.stderr)
    for target in unchecked:
        print(f"warning: {target.image}: the {target.component} stack ({len(target.patches)} patch(es)) was NOT "
              f"checked: its source is not pinned in lockfiles/{target.image}.lock; run `lock` where it is "
              "reachable", file=sys.stderr)
    return EXIT_FAILED if failed or (args.strict and unchecked) else 0


def _show_conflict(conflict) -> None:
    if conflict.expected:
        print("      the patch expects:")
        for line in conflict.expected[:12]:
            print(f"        | {line}")
    if conflict.found:
        print(f"      the source has (from line {conflict.found_at}):" if conflict.found_at else "      the source has:")
        for line in conflict.found[:12]:
            print(f"        | {line}")
