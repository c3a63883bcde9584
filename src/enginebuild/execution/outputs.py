"""Exporting what a component keeps: its declared outputs, read out of its image (a container
is created, never started), normalised and stored; the image itself is never shipped."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from enginebuild.io.store import HashingWriter

import posixpath
import shutil
import tarfile
from dataclasses import dataclass

from enginebuild.errors import BuildFailed
from enginebuild.execution.normalize import normalize_layer
from enginebuild.io.files import temp_path
from enginebuild.io.store import Store, make_blob
from enginebuild.io.tarrules import clean_name
from enginebuild.io.tars import TarWriter
from enginebuild.oci.engine import EngineApi
from enginebuild.plan.components import EDITABLE_WHEELS
from enginebuild.recipe.model import Outputs
from enginebuild.wire import JsonDoc


@dataclass(frozen=True)
class OutputRecord:
    sha256: str  # the normalised tar of the outputs
    size: int
    files: int
    wheels: tuple[tuple[str, str, int], ...] = ()  # (filename, sha256, size) for a wheels output
    name: str = ""  # the component's, once built
    seconds: float = 0.0  # how long its build took

    def to_json(self) -> JsonDoc:
        return {"sha256": self.sha256, "size": self.size, "files": self.files,
                "wheels": [list(w) for w in self.wheels], "name": self.name, "seconds": self.seconds}

    @classmethod
    def from_json(cls, data: JsonDoc) -> OutputRecord:
        return cls(str(data["sha256"]), int(data["size"]), int(data["files"]),
                   tuple((str(f), str(s), int(n)) for f, s, n in data.get("wheels") or ()),
                   str(data.get("name") or ""), float(data.get("seconds") or 0.0))


def _rename(outputs: Outputs, path: str, name: str) -> str:
    """An archive entry (its first part is the base name of `path`) as stored in the output tar."""
    rel = name.split("/", 1)[1] if "/" in name else ""
    if outputs.at_own_paths:
        return clean_name(posixpath.join(path, rel)) if rel else clean_name(path)
    return rel


def _store_wheels(tar: tarfile.TarFile, store: Store, folder: str = "") -> list[tuple[str, str, int]]:
    """The `.whl` files directly in `folder` of an archive, each into the store."""
    wheels = []
    for member in tar:
        name = clean_name(member.name)
        if member.isreg() and name.startswith(folder) and name.endswith(".whl") and "/" not in name[len(folder):]:
            handle = tar.extractfile(member)
            assert handle is not None
            blob = store.put_bytes(handle.read(), name[len(folder):])
            wheels.append((name[len(folder):], blob.sha256, blob.size))
    return wheels


def export_outputs(engine: EngineApi, image: str, component: str, outputs: Outputs, store: Store, mtime: int) -> OutputRecord:
    folder = temp_path(store.home / "tmp", "outputs", "d")
    folder.mkdir(parents=True)
    raw = folder / "raw.tar"
    count = 0
    wheels: list[tuple[str, str, int]] = []
    try:
        with engine.container(image) as container, tarfile.open(raw, "w", format=tarfile.PAX_FORMAT) as out:
            for path in outputs.paths:
                with engine.archive(container, path) as stream:
                    if stream is None:
                        raise BuildFailed(f"component {component} declares the output {path}, but its build did not "
                                          "create it", hint="check the build script, or the component's outputs")
                    with tarfile.open(fileobj=stream, mode="r|") as tar:
                        for member in tar:
                            name = _rename(outputs, path, clean_name(member.name))
                            if not name:
                                continue
                            if name.rsplit("/", 1)[-1].startswith(".wh."):
                                raise BuildFailed(f"component {component}: its output {path} holds {name!r}: a "
                                                  "name starting with .wh. is how a layer deletes a file below it",
                                                  hint="rename the file in the build script")
                            member.name = name
                            if member.islnk():
                                member.linkname = _rename(outputs, path, clean_name(member.linkname))
                            out.addfile(member, tar.extractfile(member) if member.isreg() else None)
                            count += 1
            if outputs.kind == "editable":  # the tree is the output; its editable wheel is kept beside it
                with engine.archive(container, EDITABLE_WHEELS) as stream:
                    if stream is not None:
                        with tarfile.open(fileobj=stream, mode="r|") as tar:
                            wheels = _store_wheels(tar, store, "editable-wheel/")
        if outputs.kind == "wheels":
            with tarfile.open(raw, "r:") as tar:
                wheels = _store_wheels(tar, store)
        if outputs.kind in ("wheels", "editable") and not wheels:
            where = outputs.paths[0] if outputs.kind == "wheels" else f"the editable build of {outputs.paths[0]}"
            raise BuildFailed(f"component {component} produced no wheel in {where}")
        def write(sink: HashingWriter) -> None:
            writer = TarWriter(sink, mtime=mtime)
            normalize_layer(raw, writer)
            writer.close()

        blob = make_blob(store, f"outputs of {component}", write)
        return OutputRecord(blob.sha256, blob.size, count, tuple(sorted(wheels)))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def release_outputs(store: Store, component: str, wheel: tuple[str, str, int | None], mtime: int) -> OutputRecord:
    """The outputs of a component taken from a release: the wheel (already in the store by its
    sha256) as the one entry of a normalised tar, as a build that made it would have kept it."""
    filename, sha256, _ = wheel
    path = store.verified(sha256, filename)

    def write(sink: HashingWriter) -> None:
        writer = TarWriter(sink, mtime=mtime)
        writer.add_file(filename, path, 0o644)
        writer.close()

    blob = make_blob(store, f"outputs of {component}", write)
    return OutputRecord(blob.sha256, blob.size, 1, ((filename, sha256, path.stat().st_size),), component)
