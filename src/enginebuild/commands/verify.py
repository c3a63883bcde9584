"""Check the kernel architectures of a built image: every CUDA binary enginebuild put in it
(component outputs, wheels, overlays, steps) must carry device code for each architecture
the spec declares in `cuda-archs` (`12.1a` needs `sm_121a` SASS; PTX counts with
`cuda-verify.jit`). Read on the host with the pinned cuobjdump: no GPU, no emulation.
Exit 1 naming each binary that lacks one, and what it has instead."""

from __future__ import annotations

import argparse
import json

from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="+", metavar="IMAGE")
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH",
                        help="only this platform of the spec (repeatable)")
    parser.add_argument("--json", action="store_true", help="one JSON document: per image and platform, per file")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.io.store import Store
    from enginebuild.kernels.image import declared_of, verify_plan
    from enginebuild.plan.image import plan_image
    from enginebuild.usecases.building import platforms_of

    verdicts = []
    undeclared = []
    for name in dict.fromkeys(args.images):
        spec = ws.spec(name)
        lock = ws.lock(spec)
        if not declared_of(spec):  # nothing is asked of its kernels: not a failure
            undeclared.append(name)
            if not args.json:
                print(f"{name}: declares no cuda-archs: nothing to verify (add `cuda-archs: [12.1a]` to have its "
                      "binaries checked)")
            continue
        for platform in platforms_of(spec, args.platform):
            verdict = verify_plan(spec, lock, plan_image(spec, lock, platform, ws.plan_options()), Store(ws.home))
            verdicts.append(verdict)
            if not args.json:
                print("\n".join(verdict.lines()))
    if args.json:
        print(json.dumps({"ok": all(v.ok for v in verdicts), "images": [v.to_json() for v in verdicts],
                          "not_declared": undeclared}, indent=2))
    return 0 if all(v.ok for v in verdicts) else 1
