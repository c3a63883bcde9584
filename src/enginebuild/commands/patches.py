"""Check patch stacks against the exact source each image pins, without compiling: per patch,
applies (with offsets), already upstream, obsolete (its header says upstream fixed it at or
before the pinned version) or conflicts (file, hunk, what the source has instead). With
--engine, check one stack against another version or ref without touching the lock.
Exit 1 when any patch is not `applies`; 2 for bad input (an unloadable spec or patch is
reported beside every other stack)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from enginebuild.errors import EXIT_BAD_INPUT, EXIT_FAILED, UserError
from enginebuild.io.progress import output
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.patches.apply import HunkResult
    from enginebuild.usecases.patching import StackReport


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    check = sub.add_parser("check", help="check patch stacks", description=__doc__.strip() if __doc__ else None)
    check.add_argument("images", nargs="*", metavar="IMAGE")
    check.add_argument("--all", action="store_true", help="every image of the catalogue that has a patch stack")
    check.add_argument("--engine", metavar="REF_OR_VERSION",
                       help="check the stacks on the engine's source against this release (sdist) or git ref instead "
                            "of the lock's pin; "
                            "`latest` is the newest release (upstream HEAD for git sources)")
    check.add_argument("--component", metavar="NAME",
                       help="with --engine, where stacks are on several sources: a component or overlay whose "
                            "source is the one to move (the stacks on the same source move with it)")
    check.add_argument("--behaviour", "--behavior", action="store_true",
                       help="also build the image (at --engine's version) without its patches that have checks, run "
                            "the checks in it and say per check: still needed, obsolete or changed (docs/patches.md)")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.add_argument("--strict", action="store_true",
                       help="exit 1 also when a stack could not be checked (its source is not pinned where this runs)")


def _shown(line: str) -> str:
    return line.replace("\r", "\\r").replace("\t", "\\t") if ("\r" in line or "\t" in line) else line


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.usecases.patching import check_stacks

    if not args.images and not args.all:
        raise UserError("name images to check, or --all")
    if args.component and not args.engine:
        raise UserError("--component goes with --engine")
    if args.behaviour:
        return run_behaviour(args, ws)
    report = check_stacks(ws, args.images, args.engine, args.component)
    if args.json:
        _print_json(report)
    else:
        _print_rows(report)
    for row in report.rows:
        if row.results is None:
            output().say(f"warning: {row.target.image}: the {row.target.owner} stack ({len(row.target.patches)} "
                         f"patch(es)) was NOT checked: {(row.target.unchecked or '').splitlines()[0]}")
    if report.errors:
        return EXIT_BAD_INPUT
    return EXIT_FAILED if report.failed or (args.strict and report.unchecked) else 0


def _print_json(report: StackReport) -> None:
    docs = [{"image": t.image, "component": t.owner, "source": t.description, "override": t.override,
             "checked": results is not None, "unchecked_because": t.unchecked,
             "patches": [r.to_json() for r in results] if results is not None else
             [{"name": p.name, "sha256": p.sha256, "subject": p.subject, "status": "not-checked"}
              for p in t.patches]} for t, results in ((row.target, row.results) for row in report.rows)]
    docs += [{"image": n, "error": why} for n, why in report.errors]
    print(json.dumps(docs, indent=2))


def _print_rows(report: StackReport) -> None:
    for row in report.rows:
        target = row.target
        note = " (--engine: the lock is not touched)" if target.override else ""
        print(f"{target.image}: {target.owner} {target.description}{note}")
        if row.results is None:
            for patch in target.patches:
                print(f"  {'NOT CHECKED':<17} {patch.name}  {target.unchecked}")
            continue
        for result in row.results:
            print(f"  {result.status:<17} {result.name}  {result.detail}")
            if result.status == "conflicts" and result.conflict is not None:
                _show_conflict(result.conflict)
    for name, why in report.errors:
        print(f"{name}: NOT CHECKED, the spec or a patch does not load: {why}")
    if not report.rows and not report.errors:
        output().say("no image has a patch stack")


def run_behaviour(args: argparse.Namespace, ws: Workspace) -> int:
    """--behaviour: per image named, the build without its checked patches and each check's verdict."""
    from enginebuild.usecases.bumping import STILL_NEEDED, bump

    if not args.images:
        raise UserError("--behaviour builds each image named: name them (not --all)")
    bumps = [bump(ws, name, args.engine, args.component) for name in ws.select(args.images)]
    if args.json:
        print(json.dumps([b.to_json() for b in bumps], indent=2))
    for b in bumps if not args.json else ():
        through = f" through {b.through}" if b.through != b.image else ""
        print(f"{b.image}: at {b.engine}{through} ({b.platform}), built without {', '.join(b.removed)}")
        if b.image_checks:
            print(f"  (its own checks fail there: {b.image_checks})")
        for patch in dict.fromkeys(v.check.patch for v in b.verdicts):
            ours = [v for v in b.verdicts if v.check.patch == patch]
            print(f"  {patch}: text: {ours[0].text}")
            for v in ours:
                said = v.run.why or f"printed {_printed(v.run.output)}"
                print(f"    {v.check.name:<28} {v.verdict:<13} {said}")
                if v.disagree:
                    print(f"      the text says {v.text}, the behaviour {v.verdict}: they disagree; a human must look")
    return 0 if all(v.verdict == STILL_NEEDED and v.text == "applies" for b in bumps for v in b.verdicts) else EXIT_FAILED


def _printed(out: str) -> str:
    from enginebuild.recipe.patchchecks import normal

    text = normal(out)
    return repr(text[:120] + ("..." if len(text) > 120 else ""))


def _show_conflict(conflict: HunkResult) -> None:
    if conflict.expected:
        print("      the patch expects:")
        for line in conflict.expected[:12]:
            print(f"        | {_shown(line)}")
    if conflict.found:
        print(f"      the source has (from line {conflict.found_at}):" if conflict.found_at else "      the source has:")
        for line in conflict.found[:12]:
            print(f"        | {_shown(line)}")



