"""Name the images whose current inputs are not yet pushed to PREFIX/IMAGE (`--prefix`): their content tag
(`sha-<16 hex>`, the tag `push` gives by default and CI always adds) is absent there. One name
per line, or --json with each image's content tag and the digest found. Read-only: it builds
nothing and needs no lock beyond the committed one."""

from __future__ import annotations

import argparse
import json

from enginebuild.commands.arguments import add_compression_argument
from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="*", metavar="IMAGE", help="default: every buildable image")
    parser.add_argument("--prefix", metavar="REGISTRY/NAMESPACE",
                        help="where the images are pushed, each to PREFIX/IMAGE, e.g. ghcr.io/org (required)")
    parser.add_argument("--to", help=argparse.SUPPRESS)  # one meaning of --to: a repository (push, image --push)
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH",
                        help="the platforms CI pushes (default: every platform of each spec)")
    parser.add_argument("--json", action="store_true")
    add_compression_argument(parser)  # the pushes' compression: a zstd push has content tags of its own


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.errors import UserError

    if args.to is not None:
        raise UserError(f"changed --to {args.to}: --to names one repository (push, image --push); "
                        "changed looks under a prefix", hint=f"changed --prefix {args.to}")
    if not args.prefix:
        raise UserError("changed needs --prefix REGISTRY/NAMESPACE (each image is looked for at PREFIX/IMAGE)")
    from enginebuild.usecases.publishing import unpushed

    rows = unpushed(ws, args.images, args.prefix, args.platform, args.compression)
    if args.json:
        print(json.dumps({"images": rows}, indent=2))
    else:
        for row in rows:
            if row["changed"]:
                print(row["image"])
    return 0
