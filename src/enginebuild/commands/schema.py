"""Print the JSON Schema of images/<name>/image.yaml, generated from the schema the loader
validates with (for editors: completion and validation while writing a spec)."""

from __future__ import annotations

import argparse
import json

from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", metavar="FILE", help="write it to FILE instead of printing it")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.spec.jsonschema import image_json_schema

    text = json.dumps(image_json_schema(), indent=2, sort_keys=True) + "\n"
    if args.out:
        from pathlib import Path

        from enginebuild.io.files import write_atomic

        write_atomic(Path(args.out), text.encode())
    else:
        print(text, end="")
    return 0
