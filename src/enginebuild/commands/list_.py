"""List the images of the catalogue: platforms, components, patch count (every stack) and lock state."""

from __future__ import annotations

import argparse
import json

from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.usecases.cataloguing import rows

    found = rows(ws)
    if args.json:
        print(json.dumps(found, indent=2))
        return 0 if not any(r["lock"] == "broken" for r in found) else 2
    width = max([len(r["image"]) for r in found] + [5])
    print(f"{'IMAGE':<{width}}  {'PLATFORMS':<24} {'LOCK':<10} {'PATCHES':>7}  COMPONENTS")
    for r in found:
        parts = ", ".join(r["components"] + [f"{o} (overlay)" for o in r["overlays"]]) or "-"
        if r["lock"] == "broken":
            parts = "spec does not load: " + r["error"]
        print(f"{r['image']:<{width}}  {','.join(r['platforms']):<24} {r['lock']:<10} {r['patches']:>7}  {parts}")
    return 0 if not any(r["lock"] == "broken" for r in found) else 2
