"""Making the layers of a chain: enginebuild writes most of them directly (deterministic tars);
commands are run by BuildKit and the layers they wrote are cut out of the result and
normalised. Each made layer is a blob in the store (its uncompressed tar) and a record."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from enginebuild.io.git import Mirrors
    from enginebuild.io.store import HashingWriter

import hashlib
import json
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from enginebuild.errors import BuildFailed
from enginebuild.execution.assemble import Assembler
from enginebuild.execution.normalize import normalize_layer
from enginebuild.execution.outputs import OutputRecord
from enginebuild.io.files import temp_path
from enginebuild.io.store import Blob, Store, make_blob
from enginebuild.io.tars import TarWriter
from enginebuild.layerkinds.base import WriteJob
from enginebuild.oci.engine import EngineApi
from enginebuild.plan.model import LayerNode
from enginebuild.plan.stored import put_layer_blobs


def _blob(store: Store, what: str, mtime: int, write: Callable[[TarWriter], object]) -> Blob:
    def body(sink: HashingWriter) -> None:
        writer = TarWriter(sink, mtime=mtime)
        write(writer)
        writer.close()

    return make_blob(store, what, body)


@dataclass
class LayerMaker:
    store: Store
    engine: EngineApi
    assembler: Assembler
    mtime: int
    image: str
    outputs: dict[str, OutputRecord]  # component key -> its outputs
    mirrors: Mirrors = ()  # where git sources are fetched from instead (the checkout's)

    def make(self, node: LayerNode, parent_tip_image: str | None = None,
             whole_chain: Callable[[], str] | None = None) -> list[tuple[str, int]]:
        """Write the layer of `node` (its kind says how: layerkinds/) and record its blob;
        `whole_chain` loads the chain below where `parent_tip_image` is only a prefix of it."""
        job = WriteJob(node.name, node.inputs, self.store, self.engine, self.assembler, self.image, self.outputs,
                       parent_tip_image, whole_chain, self.mirrors)
        several = node.payload.write_layers(job, self.mtime)
        if several is not None:
            blobs = several
        else:
            blob = _blob(self.store, node.name, self.mtime, lambda w: node.payload.write(job, w))
            blobs = [(blob.sha256, blob.size)]
        put_layer_blobs(self.store, node, blobs, {})
        return blobs


def cut_new_layers(engine: EngineApi, image: str, parent_sizes: dict[int, int], parent_count: int,
                   folder: Path) -> list[Path]:
    """The layers of `image` after the first `parent_count`, from one streamed `docker save`.

    A layer whose size matches a parent layer's is only hashed on its way past; every other
    layer is kept in `folder` until manifest.json (the last entry) tells their order."""
    kept: dict[str, Path] = {}
    hashes: dict[str, str] = {}
    order: list[str] = []
    with engine.save(image) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            if member.name.endswith("/layer.tar") and member.isreg():
                handle = tar.extractfile(member)
                assert handle is not None
                digest = hashlib.sha256()
                if member.size in parent_sizes:
                    while block := handle.read(1 << 20):
                        digest.update(block)
                else:
                    target = folder / f"{len(kept)}.tar"
                    with open(target, "wb") as out:
                        while block := handle.read(1 << 20):
                            digest.update(block)
                            out.write(block)
                    kept[member.name] = target
                hashes[member.name] = digest.hexdigest()
            elif member.name == "manifest.json":
                handle = tar.extractfile(member)
                assert handle is not None
                order = json_layers(handle.read())
    new = order[parent_count:]
    missing = [name for name in new if name not in kept]
    if missing:
        raise BuildFailed(f"a layer written by the build of {image} has the size of a layer below it; "
                          "run the command again (it keeps every layer then)")
    return [kept[name] for name in new]


def json_layers(data: bytes) -> list[str]:
    return list(json.loads(data)[0]["Layers"])


def normalize_into_store(store: Store, raw: Path, mtime: int, what: str) -> Blob:
    return _blob(store, what, mtime, lambda w: normalize_layer(raw, w))


def scratch_folder(store: Store) -> Path:
    folder = temp_path(store.home / "tmp", "layers", "d")
    folder.mkdir(parents=True)
    return folder


def remove_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)

