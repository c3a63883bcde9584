"""Check a built image's runtime closure (closure.py) from its layers: the stored layers
enginebuild made, and the base's, read once from the engine (`docker save`) and then kept by
diff ID. Every layer is searched; the binaries of the layers enginebuild made are judged
(system packages and the base are Debian's or NVIDIA's: searched, not judged).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from enginebuild.errors import BuildFailed, command
from enginebuild.io.store import Store
from enginebuild.kernels.closure import Closure, check_closure
from enginebuild.kernels.filetable import TABLE_RECORD, Entry, FileTable, saved_layers, stored_layer
from enginebuild.kernels.scan import Skip
from enginebuild.plan.model import ImagePlan
from enginebuild.plan.stored import layer_blobs
from enginebuild.recipe.model import ImageSpec

Saver = Callable[[str], contextlib.AbstractContextManager[IO[bytes]]]  # image ref -> its `docker save` stream


def image_table(plan: ImagePlan, store: Store, save: Saver | None) -> tuple[FileTable, set[str], int]:
    """The image's file table, the names of the layers whose binaries are judged, and the count
    of layers read."""
    table, ours, layers = FileTable(), set(), 0
    base = plan.runtime.base
    if base is not None and base.digest:
        record = store.record("bases", base.digest.split(":")[1])
        if record is None:
            raise BuildFailed(f"{plan.image} ({plan.platform}): its base {base.ref} is not known here",
                              hint=f"run `{command()} image {plan.image}` first")
        diff_ids = [str(d).split(":")[1] for d, _ in record["layers"]]
        kept = {d: store.record(TABLE_RECORD, d) for d in diff_ids}
        if any(v is None for v in kept.values()):
            if save is None:
                raise BuildFailed(f"{plan.image} ({plan.platform}): the base's files are not read yet",
                                  hint="run it where the engine holds the base")
            with save(base.ref) as stream:
                kept.update(saved_layers(store, stream))
        for diff_id in diff_ids:
            layer = kept.get(diff_id)
            if layer is None:
                raise BuildFailed(f"{plan.image} ({plan.platform}): the engine's copy of {base.ref} lacks "
                                  f"layer sha256:{diff_id}")
            table.add("base", layer)
            layers += 1
    for node in plan.runtime.layers:
        blobs = layer_blobs(store, node)
        if blobs is None:
            raise BuildFailed(f"{plan.image} ({plan.platform}) is not built at its current inputs ({node.name})",
                              hint=f"run `{command()} image {plan.image}` first")
        for sha, _ in blobs:
            table.add(node.name, stored_layer(store, sha), sha)
            layers += 1
        if node.payload.engine_files():
            ours.add(node.name)
    return table, ours, layers


def library_path(plan: ImagePlan) -> str:
    env = dict(plan.runtime.base.env if plan.runtime.base else ())
    env.update(dict(plan.runtime.env))
    env.update(dict(plan.config.env))
    return env.get("LD_LIBRARY_PATH", "")


def check_plan(spec: ImageSpec, plan: ImagePlan, store: Store, save: Saver | None) -> Closure:
    start = time.monotonic()
    table, ours, layers = image_table(plan, store, save)

    def read(entry: Entry) -> Path | None:
        return store.path(entry.at[0]) if entry.at else None

    skip = tuple(Skip(s.path, s.why) for s in spec.runtime_check.skip)
    closure = check_closure(spec.name, plan.platform, table, ours, library_path(plan), skip, read)
    closure.layers, closure.seconds = layers, time.monotonic() - start
    return closure
