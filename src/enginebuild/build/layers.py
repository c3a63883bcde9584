"""Making the layers of a chain: enginebuild writes most of them directly (deterministic tars);
commands are run by BuildKit and the layers they wrote are cut out of the result and
normalised. Each made layer is a blob in the store (its uncompressed tar) and a record."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from enginebuild.build.assemble import Assembler, put_layer_blobs
from enginebuild.build.debfile import write_sysroot
from enginebuild.build.filelayer import FileItem, files_blob
from enginebuild.build.normalize import normalize_layer
from enginebuild.build.outputs import OutputRecord
from enginebuild.build.wheels import install_wheel, install_wheels, record_paths, removals, unmet_requirements, whiteout
from enginebuild.errors import BuildFailed, command
from enginebuild.io.files import temp_path
from enginebuild.io.store import Blob, Store, make_blob
from enginebuild.io.tars import TarWriter, clean_name
from enginebuild.oci.engine import Engine
from enginebuild.patches.check import check_stack
from enginebuild.patches.patched import stack_failure
from enginebuild.plan.model import Data, Files, LayerNode, OutputTree, OverlayFiles, Sysroot, Wheel, Wheels
from enginebuild.sources.trees import FILE, SourceTree


def _blob(store: Store, what: str, mtime: int, write: Callable[[TarWriter], object]) -> Blob:
    def body(sink: Any) -> None:
        writer = TarWriter(sink, mtime=mtime)
        write(writer)
        writer.close()

    return make_blob(store, what, body)


@dataclass
class LayerMaker:
    store: Store
    engine: Engine
    assembler: Assembler
    mtime: int
    image: str
    outputs: dict[str, OutputRecord]  # component key -> its outputs

    def make(self, node: LayerNode, parent_tip_image: str | None = None) -> list[tuple[str, int]]:
        payload = node.payload
        if isinstance(payload, Sysroot):
            debs = [(self.store.verified(d.sha256, f"{d.name} {d.version}"), d.name) for d in payload.debs]
            blob = _blob(self.store, node.name, self.mtime, lambda w: write_sysroot(debs, w))
        elif isinstance(payload, Files):
            blob = files_blob(self.store, node.name, self.mtime, [
                FileItem(e.dest, e.mode, e.src, node.inputs[f"file {e.display}"], e.display) if e.src is not None
                else FileItem(e.dest, e.mode, self.store.verified(str(e.sha256), e.display), None, e.display)
                for e in payload.entries])
        elif isinstance(payload, Data):
            blob = _blob(self.store, node.name, self.mtime, lambda w: w.add_bytes(payload.dest, payload.data))
        elif isinstance(payload, Wheel):
            blob = _blob(self.store, node.name, self.mtime, lambda w: self._component_wheels(payload, w))
        elif isinstance(payload, Wheels):
            blob = _blob(self.store, node.name, self.mtime, lambda w: self._wheels(payload, w))
        elif isinstance(payload, OutputTree):
            blob = _blob(self.store, node.name, self.mtime, lambda w: self._output(payload, w))
        elif isinstance(payload, OverlayFiles):
            assert parent_tip_image is not None
            blob = _blob(self.store, node.name, self.mtime, lambda w: self._overlay(payload, parent_tip_image, w))
        else:
            raise BuildFailed(f"layer {node.name}: nothing knows how to make it")
        blobs = [(blob.sha256, blob.size)]
        put_layer_blobs(self.store, node, blobs, {})
        return blobs

    def _component_wheels(self, payload: Wheel, writer: TarWriter) -> None:
        record = self.outputs[payload.component_key]
        for filename, sha, _ in sorted(record.wheels):
            wheel = self.store.verified(sha, filename)
            unmet = unmet_requirements(wheel, payload.closure, payload.target) if payload.closure is not None else []
            if unmet:
                raise BuildFailed(f"{filename} (built by component {payload.pin.component}) needs what the lock did "
                                  f"not resolve: {'; '.join(unmet)}",
                                  hint="its source states other needs than the wheel: point `requires-from` at the "
                                       f"files its build reads, then `{command()} lock {self.image}`")
            install_wheel(wheel, filename, payload.site_packages, payload.interpreter, writer, payload.editable)

    def _wheels(self, payload: Wheels, writer: TarWriter) -> None:
        wheels = [(self.store.verified(pin.sha256, pin.filename), pin.filename) if pin.sha256 else self._built_wheel(pin)
                  for pin in payload.pins]
        written = install_wheels(wheels, payload.site_packages, payload.interpreter, writer)
        for folder, record in self._base_records(payload) if payload.removes else []:
            for gone in removals(record_paths(record, folder), folder, payload.site_packages, written):
                whiteout(writer, gone)

    def _base_records(self, payload: Wheels) -> list[tuple[str, bytes]]:
        """The RECORD of each distribution of the base these wheels replace, read from the base."""
        self.assembler.ensure_pulled(payload.base)
        out = []
        with self.engine.container(payload.base) as container:
            for name, folder in payload.removes:
                with self.engine.archive(container, f"/{folder}/RECORD") as stream:
                    data = None
                    if stream is not None:
                        with tarfile.open(fileobj=stream, mode="r|") as tar:
                            member = next(iter(tar), None)
                            handle = tar.extractfile(member) if member is not None and member.isreg() else None
                            data = handle.read() if handle is not None else None
                if data is None:
                    raise BuildFailed(f"{name} replaces the version of the base {payload.base}, but the base has no "
                                      f"/{folder}/RECORD saying which files are that version's",
                                      hint="a distribution installed without a RECORD cannot be replaced file by file; "
                                           "keep the base's version")
                out.append((folder, data))
        return out

    def _built_wheel(self, pin: Any) -> tuple[Path, str]:
        record = self.store.record("built-wheels", f"{pin.name}-{pin.commit}")
        if record is None:
            raise BuildFailed(f"python {pin.name} from git {pin.commit[:12]} has no built wheel (run `fetch`)")
        return self.store.verified(str(record["sha256"]), str(record["filename"])), str(record["filename"])

    def _output(self, payload: OutputTree, writer: TarWriter) -> None:
        record = self.outputs[payload.component_key]
        outputs = payload.outputs
        if outputs.kind == "wheels":
            for filename, sha, _ in sorted(record.wheels):
                install_wheel(self.store.verified(sha, filename), filename, payload.site_packages,
                              payload.interpreter, writer)
            return
        root = clean_name(outputs.to) if outputs.kind == "prefix" else ""
        with tarfile.open(self.store.verified(record.sha256, f"outputs of {payload.component}"), "r:") as tar:
            for member in tar:
                member.name = f"{root}/{member.name}" if root else member.name
                if member.islnk() and root:
                    member.linkname = f"{root}/{clean_name(member.linkname)}"
                writer.add_member(member, tar.extractfile(member) if member.isreg() else None)

    def _overlay(self, payload: OverlayFiles, image: str, writer: TarWriter) -> None:
        paths = sorted({f.path for p in payload.patches for f in p.patch.files})
        tree = BaseFiles(self.engine, image, payload.installed, paths)
        outcome = check_stack([p.patch for p in payload.patches], tree)
        failure = outcome.first_failure
        if failure is not None:
            raise stack_failure(payload.name, tree.description, failure, self.image)
        root = clean_name(payload.installed)
        for path in sorted(outcome.files):
            data = outcome.files[path]
            if data is None:
                whiteout(writer, f"{root}/{path}")
            else:
                kept = tree.mode(path) if tree.kind(path) == FILE else 0o644
                writer.add_bytes(f"{root}/{path}", data, outcome.modes.get(path, kept))


class BaseFiles(SourceTree):
    """Files of an installed package, read out of the image that ships it."""

    def __init__(self, engine: Engine, image: str, installed: str, paths: list[str]):
        self.description = f"installed in {image} at {installed}"
        self.files: dict[str, tuple[bytes, int]] = {}
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

    def kind(self, path: str) -> str | None:
        return FILE if path in self.files else None

    def mode(self, path: str) -> int:
        return self.files[path][1] if path in self.files else 0o644

    def read_many(self, paths: Any) -> dict[str, bytes | None]:
        return {p: self.files[p][0] if p in self.files else None for p in paths}


def cut_new_layers(engine: Engine, image: str, parent_sizes: dict[int, int], parent_count: int,
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
    import json

    return list(json.loads(data)[0]["Layers"])


def normalize_into_store(store: Store, raw: Path, mtime: int, what: str) -> Blob:
    return _blob(store, what, mtime, lambda w: normalize_layer(raw, w))


def scratch_folder(store: Store) -> Path:
    folder = temp_path(store.home / "tmp", "layers", "d")
    folder.mkdir(parents=True)
    return folder


def remove_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)

