"""Files of the engine the base ships, patched on the host: read from the chain below, the
overlay's patch stack applied by the same code as `patches check`, the changed files written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from enginebuild.core.keys import unkeyed
from enginebuild.errors import BuildFailed
from enginebuild.io.tarrules import clean_name
from enginebuild.layerkinds.base import INSTALL_WRITER, PATCH_WRITER, LayerPayload, WriteJob
from enginebuild.recipe.model import PatchRef
from enginebuild.sources import Pinned

if TYPE_CHECKING:
    from enginebuild.io.tars import TarWriter


@dataclass(frozen=True)
class OverlayFiles(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = (*INSTALL_WRITER, *PATCH_WRITER, "layerkinds/basefiles.py")
    name: str = field(metadata=unkeyed("the engine's name, for messages: the files are the base's (base) under "
                                       "installed"))
    installed: str
    patches: tuple[PatchRef, ...]
    # gc keeps what it names
    source: Pinned = field(metadata=unkeyed("the upstream release the stack was checked against: not read to write "
                                            "the layer (the files are the base's)"))
    base: str = ""  # the chain key of the base whose files it patches
    reads_chain: ClassVar[bool] = True

    def write(self, job: WriteJob, writer: TarWriter) -> None:
        from enginebuild.layerkinds.basefiles import BaseFiles
        from enginebuild.layerkinds.installer import whiteout
        from enginebuild.patches.check import check_stack
        from enginebuild.patches.patched import stack_failure
        from enginebuild.sources.trees import FILE

        if job.chain_image is None:
            raise BuildFailed(f"layer {job.name}: the chain below is not loaded")
        paths = sorted({f.path for p in self.patches for f in p.patch.files})
        tree = BaseFiles(job.engine, job.chain_image, self.installed, paths)
        outcome = check_stack([p.patch for p in self.patches], tree)
        failure = outcome.first_failure
        if failure is not None:
            raise stack_failure(self.name, tree.description, failure, job.image)
        root = clean_name(self.installed)
        for path in sorted(outcome.files):
            data = outcome.files[path]
            if data is None:
                whiteout(writer, f"{root}/{path}")
            else:
                kept = tree.mode(path) if tree.kind(path) == FILE else 0o644
                writer.add_bytes(f"{root}/{path}", data, outcome.modes.get(path, kept))

    def stands_alone(self) -> bool:
        return False  # the files are the base's, read from the chain below

    def describe(self, name: str, folder: str) -> str:
        return (f"# enginebuild: {len(self.patches)} patch(es) of {self.name} applied on the host to the "
                f"files the base has in {self.installed}")
