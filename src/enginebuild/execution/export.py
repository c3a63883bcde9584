"""`image --output`: what a build made, written to a folder of the host, as Docker's
`--output type=local,dest=DIR` does: the runtime's filesystem, or one component's outputs (its
files as they land in the runtime, or its wheels). The folder is written beside its final
name and renamed into place, so that it is whole or absent; it must not exist, or be empty."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from enginebuild.errors import UserError
from enginebuild.execution.layers import cut_new_layers
from enginebuild.execution.outputs import OutputRecord
from enginebuild.io.files import write_folder
from enginebuild.io.layertree import LayerTree
from enginebuild.io.store import Store
from enginebuild.io.tarrules import clean_name
from enginebuild.oci.engine import EngineApi
from enginebuild.recipe.model import Outputs, OutputsKind


def parse_outputs(values: list[str]) -> tuple[Path | None, dict[str, Path]]:
    """`DIR` (the runtime) and `COMPONENT=DIR` (a component's outputs), each at most once."""
    runtime: Path | None = None
    components: dict[str, Path] = {}
    for value in values:
        name, sep, folder = value.partition("=")
        if sep and not folder:
            raise UserError(f"--output {value!r}: expected DIR or COMPONENT=DIR")
        target = Path(folder if sep else value).expanduser()
        if sep:
            if name in components:
                raise UserError(f"--output {name}=…: given twice")
            components[name] = target
        elif runtime is not None:
            raise UserError("--output DIR (the runtime's filesystem): given twice")
        else:
            runtime = target
    targets = ([runtime] if runtime else []) + list(components.values())
    for target in targets:
        inside = next((t for t in targets if t is not target and _within(target, t)), None)
        if inside is not None:
            raise UserError(f"--output {target}: is inside --output {inside}, which the build writes (a link the "
                            "image puts there would lead elsewhere)",
                            hint="give each output a folder of its own, outside the others")
        if target.is_symlink():
            raise UserError(f"--output {target}: is a symbolic link (to {os.readlink(target)})",
                            hint="name the folder itself: enginebuild writes a new folder, never through a link")
        if sum(os.path.realpath(t) == os.path.realpath(target) for t in targets) > 1:
            raise UserError(f"--output {target}: named twice (each output needs a folder of its own)")
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise UserError(f"--output {target}: exists and is not an empty folder",
                            hint="name a new folder (nothing already there is overwritten)")
    return runtime, components


def _within(path: Path, folder: Path) -> bool:
    """Whether `path` is inside `folder` on disk: both resolved (a link in either's parents
    followed), never compared as text."""
    inner, outer = os.path.realpath(path), os.path.realpath(folder)
    return inner != outer and inner.startswith(outer.rstrip("/") + "/")


def export_runtime(engine: EngineApi, image: str, target: Path) -> Path:
    """The image's own filesystem: its layers stacked (never a container's, which adds
    /.dockerenv, /etc/hosts and mount points)."""
    def fill(folder: Path) -> None:
        spool = Path(tempfile.mkdtemp(prefix=".layers-", dir=folder.parent))
        try:
            tree = LayerTree(folder)
            for layer in cut_new_layers(engine, image, {}, 0, spool):  # every layer, bottom first
                tree.add(layer)
            tree.finish()
        finally:
            shutil.rmtree(spool, ignore_errors=True)
    return write_folder(target, fill)


def export_component(store: Store, record: OutputRecord, outputs: Outputs, target: Path) -> Path:
    """A component's outputs: its files under the runtime's layout (`prefix` outputs under `to`),
    or its wheel files."""
    def fill(folder: Path) -> None:
        if outputs.kind is OutputsKind.WHEELS:
            for filename, sha, _ in sorted(record.wheels):
                shutil.copyfile(store.verified(sha, filename), folder / Path(filename).name)
            return
        to = clean_name(outputs.to) if outputs.kind is OutputsKind.PREFIX else ""
        root = folder / to if to else folder
        root.mkdir(parents=True, exist_ok=True)
        tree = LayerTree(root)
        tree.add(store.verified(record.sha256, "outputs"))
        tree.finish()
    return write_folder(target, fill)
