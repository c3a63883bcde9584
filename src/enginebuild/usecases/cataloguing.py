"""What `list` shows, the use case behind it: every image of the catalogue (variants included)
with its platforms, components, overlays, patch count and the state of its lock; a spec that
does not load is a row that says why."""

from __future__ import annotations

from enginebuild.lock.lockfile import stale_inputs
from enginebuild.wire import JsonDoc
from enginebuild.workspace import Workspace


def lock_state(ws: Workspace, name: str) -> str:
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
