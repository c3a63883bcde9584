"""Rebuild an image from its lock with nothing reused (an empty store but for verified
downloads, BuildKit without its cache) and compare it layer by layer with the image built
here, or with a pushed one (`--against REPO@sha256:...`). Exit 1 when a layer or the config
differs, naming the layer, its stage and its first differing files (path, size, mode, owner,
mtime, content hash)."""

from __future__ import annotations

import argparse
import json

from enginebuild.errors import UserError
from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="+", metavar="IMAGE")
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH",
                        help="only this platform of the spec (repeatable)")
    parser.add_argument("--against", metavar="REPO@sha256:...",
                        help="compare with this pushed image (an index or a manifest) instead of the local build")
    parser.add_argument("--json", action="store_true", help="one JSON document, layer by layer")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.oci.reference import parse_image_ref
    from enginebuild.usecases.reproducing import reproduce_images

    against = None
    if args.against:
        try:
            against = parse_image_ref(args.against)
        except ValueError as exc:
            raise UserError(f"--against {args.against!r}: {exc}") from None
        if not against.digest:
            raise UserError(f"--against {args.against!r}: give a digest (REPO@sha256:...); a tag could move")
        if len(args.images) != 1:
            raise UserError("--against compares one image: name one")
    results = []
    for result in reproduce_images(ws, args.images, args.platform, against):
        results.append(result)
        if not args.json:
            print("\n".join(result.lines()))
    if args.json:
        print(json.dumps({"ok": all(r.ok for r in results), "images": [r.to_json() for r in results]}, indent=2))
    return 0 if all(r.ok for r in results) else 1
