"""Build contexts: each stage gets exactly its own files, as a deterministic tar stream.

Entries are sorted, owned by root, dated at the epoch and carry only the modes the plan
gives them, so the same inputs make the same bytes on any machine, whatever its umask
or file times; the builder then produces the same layers.
"""
from __future__ import annotations

import io
import os
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.errors import EngineBuildError

EPOCH = 0


@dataclass(frozen=True)
class ContextItem:
    """One file of a stage's context. `digest` is its identity in the stage key.

    Its bytes come from exactly one of: `data` (generated), `path` (a file of the repo),
    `artifact` (a fetched file in the store, by sha256) or `derive` (made from fetched
    files, such as a root filesystem unpacked from .debs).
    """

    arcname: str
    digest: str
    mode: int = 0o644
    data: bytes | None = field(default=None, compare=False, repr=False)
    path: Path | None = field(default=None, compare=False)
    artifact: str | None = field(default=None, compare=False)
    derive: tuple | None = field(default=None, compare=False)
    label: str = field(default="", compare=False)  # what a user calls it, for "which input changed"


def _info(name: str, size: int = 0, mode: int = 0o644, kind=tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.type = size, mode, kind
    info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "root", "root"
    return info


def _parents(name: str) -> list:
    parts = name.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


class ContextWriter:
    """Writes a context tar: directories implied by file names are added once, in order."""

    def __init__(self, fileobj):
        self.tar = tarfile.open(fileobj=fileobj, mode="w|", format=tarfile.GNU_FORMAT)
        self.dirs: set = set()

    def add_bytes(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._dirs_for(name)
        self.tar.addfile(_info(name, len(data), mode), io.BytesIO(data))

    def add_file(self, name: str, path: Path, mode: int = 0o644) -> None:
        self._dirs_for(name)
        size = os.stat(path).st_size
        with open(path, "rb") as handle:
            self.tar.addfile(_info(name, size, mode), handle)

    def _dirs_for(self, name: str) -> None:
        for parent in _parents(name):
            if parent not in self.dirs:
                self.dirs.add(parent)
                self.tar.addfile(_info(parent, mode=0o755, kind=tarfile.DIRTYPE))

    def close(self) -> None:
        self.tar.close()


def tar_directory(folder: Path, prefix: str) -> bytes:
    """A folder of the repo as a deterministic tar under `prefix/` (symlinks leaving it refused)."""
    folder = Path(folder)
    buffer = io.BytesIO()
    tar = tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT)
    tar.addfile(_info(prefix, mode=0o755, kind=tarfile.DIRTYPE))
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        rel_dir = Path(dirpath).relative_to(folder)
        for name in sorted(dirnames) + sorted(filenames):
            path = Path(dirpath) / name
            arc = f"{prefix}/{(rel_dir / name).as_posix()}" if str(rel_dir) != "." else f"{prefix}/{name}"
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(path)
                resolved = (path.parent / target).resolve()
                if folder.resolve() not in resolved.parents:
                    raise EngineBuildError(f"{path}: symlink leaves the source folder ({target})")
                info = _info(arc, kind=tarfile.SYMTYPE, mode=0o777)
                info.linkname = target
                tar.addfile(info)
            elif stat.S_ISDIR(st.st_mode):
                tar.addfile(_info(arc, mode=0o755, kind=tarfile.DIRTYPE))
            elif stat.S_ISREG(st.st_mode):
                mode = 0o755 if st.st_mode & 0o111 else 0o644
                with open(path, "rb") as handle:
                    tar.addfile(_info(arc, st.st_size, mode), handle)
    tar.close()
    return buffer.getvalue()


def write_context(fileobj, dockerfile: str, items, materialize) -> None:
    """Stream a stage's context: its Dockerfile and its items, `materialize` giving bytes or a path."""
    writer = ContextWriter(fileobj)
    writer.add_bytes("Dockerfile", dockerfile.encode())
    for item in sorted(items, key=lambda i: i.arcname):
        content = materialize(item)
        if isinstance(content, (bytes, bytearray)):
            writer.add_bytes(item.arcname, bytes(content), item.mode)
        else:
            writer.add_file(item.arcname, Path(content), item.mode)
    writer.close()
