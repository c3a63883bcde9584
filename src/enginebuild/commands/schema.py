"""Print the JSON Schema of images/<name>/image.yaml (or, with --checks, of a patch's checks file),
generated from the schema the loader validates with (for editors: completion and validation
while writing a spec)."""

from __future__ import annotations

import argparse
import json

from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="FILE", help="write it to FILE instead of printing it")
    parser.add_argument("--checks", action="store_true",
                        help="the schema of patches/<component>/<name>.checks.yaml instead (docs/patches.md)")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.spec.jsonschema import checks_json_schema, image_json_schema

    text = json.dumps(checks_json_schema() if args.checks else image_json_schema(), indent=2, sort_keys=True) + "\n"
    if args.out:
        from pathlib import Path

        from enginebuild.io.files import write_atomic

        write_atomic(Path(args.out), text.encode())
    else:
        print(text, end="")
    return 0
