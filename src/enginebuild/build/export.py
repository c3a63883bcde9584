"""`image --output`: what a build made, written to a folder of the host, as Docker's
`--output type=local,dest=DIR` does: the runtime's filesystem, or one component's outputs (its
files as they land in the runtime, or its wheels). The folder is written beside its final
name and renamed into place, so that it is whole or absent; it must not exist, or be empty."""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path
from typing import IO, Any

from enginebuild.build.outputs import OutputRecord
from enginebuild.errors import BuildFailed, UserError
from enginebuild.io.files import temp_path
from enginebuild.io.store import Store
from enginebuild.io.tars import clean_name
from enginebuild.oci.engine import Engine


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
    for target in ([runtime] if runtime else []) + list(components.values()):
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise UserError(f"--output {target}: exists and is not an empty folder",
                            hint="name a new folder (nothing already there is overwritten)")
    return runtime, components


def _safe(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """The entries a folder can hold: no devices or fifos; no entry written outside the folder,
    through a symbolic link already written, or hard-linked to a file outside it. Symbolic links
    are kept as written (an image's `/bin/sh -> /bin/busybox` names a path of the image)."""
    if member.isdev() or member.isfifo():
        return None
    root = os.path.realpath(dest)
    if member.islnk():
        target = os.path.realpath(os.path.join(root, clean_name(member.linkname)))
        if not target.startswith(root + os.sep):
            raise BuildFailed(f"--output: {member.name} is a hard link to {member.linkname}, outside the folder")
    try:
        return tarfile.tar_filter(member, root)  # refuses names that resolve outside the folder
    except tarfile.FilterError as exc:
        raise BuildFailed(f"--output: {member.name}: {exc}") from None


def _write(target: Path, fill: Any) -> Path:
    target = target.resolve()
    stage = temp_path(target.parent, target.name, "d")
    stage.mkdir(parents=True)
    try:
        fill(stage)
        if target.exists():
            target.rmdir()  # empty, checked before the build
        stage.rename(target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return target


def _untar(stream: IO[bytes], folder: Path) -> None:
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            member.name = clean_name(member.name)
            if not member.name or member.name == ".":
                continue
            kept = _safe(member, str(folder))
            if kept is not None:
                tar.extract(kept, folder, filter="fully_trusted")  # checked by _safe, one entry at a time


def export_runtime(engine: Engine, image: str, target: Path) -> Path:
    def fill(folder: Path) -> None:
        with engine.container(image) as container, engine.archive(container, "/") as stream:
            assert stream is not None
            _untar(stream, folder)
    return _write(target, fill)


def export_component(store: Store, record: OutputRecord, kind: str, to: str, target: Path) -> Path:
    """A component's outputs: its files under the runtime's layout (`prefix` outputs under `to`),
    or its wheel files."""
    def fill(folder: Path) -> None:
        if kind == "wheels":
            for filename, sha, _ in sorted(record.wheels):
                shutil.copyfile(store.verified(sha, filename), folder / Path(filename).name)
            return
        root = folder / clean_name(to) if kind == "prefix" and clean_name(to) else folder
        root.mkdir(parents=True, exist_ok=True)
        with open(store.verified(record.sha256, "outputs"), "rb") as handle:
            _untar(handle, root)
    return _write(target, fill)
