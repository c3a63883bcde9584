"""Print the JSON Schema of images/<name>/image.yaml (or, with --checks, of a patch's checks file),
generated from the schema the loader validates with (for editors: completion and validation
while writing a spec)."""

from __future__ import annotations

import argparse

from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="FILE", help="write it to FILE instead of printing it")
    parser.add_argument("--checks", action="store_true",
                        help="the schema of patches/<component>/<name>.checks.yaml instead (docs/patches.md)")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from pathlib import Path

    from enginebuild.usecases.schemas import schema_text, write_schema

    if args.out:
        write_schema(Path(args.out), args.checks)
    else:
        print(schema_text(args.checks), end="")
    return 0
