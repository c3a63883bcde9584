"""Where the bytes of a planned layer are kept in the store: its record (the blobs it is, in
order) under the key the plan gives it. Read and written after the plan, by the build, the
registry cache and the checks; the planner itself never reads the store."""

from __future__ import annotations

from enginebuild.io.store import Store
from enginebuild.plan.model import LayerNode
from enginebuild.wire import JsonDoc


def record_key(node: LayerNode) -> str:
    """Layers a command wrote depend on everything below them; enginebuild's only on their inputs."""
    return node.stored_as


def layer_blobs(store: Store, node: LayerNode) -> list[tuple[str, int]] | None:
    record = store.record("layers", record_key(node))
    if record is None:
        return None
    return [(str(sha), int(size)) for sha, size in record["layers"]]


def put_layer_blobs(store: Store, node: LayerNode, blobs: list[tuple[str, int]], extra: JsonDoc) -> None:
    store.put_record("layers", record_key(node), {"layers": [list(b) for b in blobs], "name": node.name, **extra})
