"""Files of the engine the base ships, patched on the host: read from the chain below, the
overlay's patch stack applied by the same code as `patches check`, the changed files written."""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from typing import ClassVar

from enginebuild.core import keys
from enginebuild.errors import BuildFailed
from enginebuild.io.tars import TarWriter, clean_name
from enginebuild.layerkinds.base import INSTALL_WRITER, PATCH_WRITER, LayerPayload, WriteJob
from enginebuild.layerkinds.installer import whiteout
from enginebuild.oci.engine import Engine
from enginebuild.patches.check import check_stack
from enginebuild.patches.patched import stack_failure
from enginebuild.sources import Pinned
from enginebuild.sources.trees import FILE, FileMap
from enginebuild.spec.model import PatchRef


@dataclass(frozen=True)
class OverlayFiles(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = (*INSTALL_WRITER, *PATCH_WRITER)
    name: str
    installed: str
    patches: tuple[PatchRef, ...]
    source: Pinned  # not read to write the layer (the files are the base's); gc keeps what it names
    base: str = ""  # the chain key of the base whose files it patches
    reads_chain: ClassVar[bool] = True

    def key(self, epoch: int) -> str:
        return keys.key_of("overlay", base=self.base, installed=self.installed, epoch=epoch,
                           patches=[p.patch.sha256 for p in self.patches])

    def write(self, job: WriteJob, writer: TarWriter) -> None:
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


class BaseFiles(FileMap):
    """Files of an installed package, read out of the image that ships it."""

    def __init__(self, engine: Engine, image: str, installed: str, paths: list[str]):
        super().__init__({}, f"installed in {image} at {installed}")
        with engine.container(image) as container:
            for path in paths:
                with engine.archive(container, f"{installed.rstrip('/')}/{path}") as stream:
                    if stream is None:
                        continue
                    with tarfile.open(fileobj=stream, mode="r|") as tar:
                        for member in tar:
                            if member.isreg():
                                handle = tar.extractfile(member)
                                assert handle is not None
                                self.files[path] = (handle.read(), member.mode & 0o7777)
                            break
