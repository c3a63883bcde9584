"""What building a plan would do, node by node, without doing it (for `plan`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild.io.store import Store
from enginebuild.layerkinds.context import FromSource
from enginebuild.plan.model import ImagePlan, LayerNode
from enginebuild.plan.stored import layer_blobs
from enginebuild.state.history import BuildHistory, changed_inputs
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    from enginebuild.io.git import Mirrors
    from enginebuild.registrycache.cache import LayerCache


def _layer_made(store: Store, node: LayerNode) -> bool:
    blobs = layer_blobs(store, node)
    return blobs is not None and all(store.intact(sha, node.name) for sha, _ in blobs)


def describe(plan: ImagePlan, home: Path, cache: LayerCache | None = None, image_ids: dict[str, str] | None = None,
             mirrors: Mirrors = ()) -> JsonDoc:
    store = Store(home)
    history = BuildHistory(home).read(plan.tag)
    components = []
    for comp in plan.components:
        record = store.record("outputs", comp.key)
        if record and store.has(str(record["sha256"])):
            action = "exists"
        elif cache is not None and cache.has(comp.key):
            action = "from cache"
        else:
            action = "build"
        row: JsonDoc = {"name": comp.name, "key": comp.key, "action": action, "needs": list(comp.needs),
                               "output_size": int(record["size"]) if record else None}
        if action == "build":
            row["changed"] = changed_inputs(comp.inputs, history.get(f"component {comp.name}"))
        if comp.outside:
            row["outside_declared_inputs"] = list(comp.outside)
        if comp.routes:
            row["patch_routes"] = [r.to_json() for r in comp.routes]
        fetched = sorted({where for item in comp.context if isinstance(item.origin, FromSource)
                          if (where := item.origin.source.source.fetched_from(mirrors))})
        if fetched:
            row["mirrors"] = fetched
        components.append(row)
    layers = []
    for node in plan.runtime.layers:
        by_command = node.by_command
        if _layer_made(store, node):
            action = "exists"
        elif by_command and cache is not None and cache.has(node.chain):
            action = "from cache"
        else:
            action = "build" if by_command else "write"
        row = {"name": node.name, "kind": node.kind, "key": node.chain, "action": action,
               "by": "buildkit" if by_command else "enginebuild",
               "content_key": node.key}  # what its bytes depend on (the chain key adds what is below it)
        if action in ("build", "write"):
            row["changed"] = changed_inputs(node.inputs, history.get(node.name))
        layers.append(row)
    present = image_ids or {}
    return {"image": plan.image, "platform": plan.platform, "tag": plan.tag, "base": plan.runtime.base.ref
            if plan.runtime.base else "scratch", "components": components, "layers": layers,
            "components_to_build": [c["name"] for c in components if c["action"] == "build"],
            "layers_to_build": [row["name"] for row in layers if row["action"] == "build"],
            "layers_to_write": [row["name"] for row in layers if row["action"] == "write"],
            "from_cache": [c["name"] for c in components if c["action"] == "from cache"]
            + [row["name"] for row in layers if row["action"] == "from cache"],
            "image_present": bool(present.get(plan.tag)), "image_id": present.get(plan.tag) or None}
