"""List the images of the catalogue: platforms, components, patch count (every stack) and lock state."""

from __future__ import annotations

import argparse
import json

from enginebuild.wire import JsonDoc
from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def lock_state(ws: Workspace, name: str) -> str:
    from enginebuild.lock.lockfile import stale_inputs

    spec = ws.spec(name)
    if spec.abstract:
        return "abstract"
    lock = ws.lock(spec)
    if stale_inputs(spec, lock):
        return "missing" if lock is None else "stale"
    assert lock is not None
    return "not-here" if lock.blocked() else "locked"


def rows(ws: Workspace) -> list[JsonDoc]:
    out = []
    broken = ws.broken()
    for base in ws.catalog.names():
        if base in broken:
            out.append({"image": base, "platforms": [], "lock": "broken", "components": [], "install": [],
                        "overlays": [], "patches": 0, "extends": None, "description": None,
                        "error": broken[base].message})
            continue
        names = [base] + [f"{base}:{v}" for v in ws.spec(base).variants if not ws.spec(base).abstract]
        for name in names:
            spec = ws.spec(name)
            lock = None if spec.abstract else ws.lock(spec)
            out.append({"image": name, "platforms": list(spec.platforms), "lock": lock_state(ws, name),
                        "not_buildable_here": lock.blocked() if lock is not None else {},
                        "components": [c.name for c in spec.components], "install": list(spec.install),
                        "overlays": [o.name for o in spec.overlays], "patches": len(spec.all_patches),
                        "extends": spec.chain[1] if len(spec.chain) > 1 else None, "description": spec.description})
    return out


def run(args: argparse.Namespace, ws: Workspace) -> int:
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
