"""List the images of the catalogue: platform, engine, patch count and lock state."""
from __future__ import annotations

import json


def add_arguments(parser):
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args, ws) -> int:
    from enginebuild.lockfile import stale_inputs

    rows = []
    for name in ws.catalog.names():
        spec = ws.spec(name)
        if spec.abstract:
            state = "abstract"
        else:
            lock = ws.lock(name)
            problems = stale_inputs(spec, lock)
            if problems:
                state = "missing" if lock is None else "stale"
            elif lock.unresolved():
                state = "unresolved"
            else:
                state = "locked"
        engine = f"{spec.engine.name} ({spec.engine.source.describe()})" if spec.engine else "-"
        rows.append({"image": name, "platform": spec.platform, "engine": engine, "patches": len(spec.patches),
                     "extends": spec.chain[1] if len(spec.chain) > 1 else None, "lock": state,
                     "description": spec.description})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max([len(r["image"]) for r in rows] + [5])
    print(f"{'IMAGE':<{width}}  {'PLATFORM':<12} {'LOCK':<10} {'PATCHES':>7}  ENGINE")
    for r in rows:
        print(f"{r['image']:<{width}}  {r['platform']:<12} {r['lock']:<10} {r['patches']:>7}  {r['engine']}")
    return 0
