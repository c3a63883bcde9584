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
    parser.add_argument("--archs", metavar="LIST", type=_archs, default=(),
                        help="hold the built image to these architectures (comma-separated, such as 12.1a) instead "
                             "of its cuda-archs: what another GPU needs of it, nothing rebuilt")


def _archs(text: str) -> tuple[str, ...]:
    from enginebuild.kernels.archs import parse_declared

    archs = tuple(a.strip() for a in text.split(",") if a.strip())
    for arch in archs:
        try:
            parse_declared(arch)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if not archs:
        raise argparse.ArgumentTypeError("expected architectures such as 12.1a or 12.0,12.1a")
    return archs


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.usecases.checking import verify_images

    verdicts = []
    undeclared = []
    for verdict in verify_images(ws, args.images, args.platform, args.archs):
        if isinstance(verdict, str):  # nothing is asked of its kernels: not a failure
            undeclared.append(verdict)
            if not args.json:
                print(f"{verdict}: declares no cuda-archs: nothing to verify (add `cuda-archs: [12.1a]` to have its "
                      "binaries checked)")
            continue
        verdicts.append(verdict)
        if not args.json:
            print("\n".join(verdict.lines()))
    if args.json:
        print(json.dumps({"ok": all(v.ok for v in verdicts), "images": [v.to_json() for v in verdicts],
                          "not_declared": undeclared}, indent=2))
    return 0 if all(v.ok for v in verdicts) else 1
