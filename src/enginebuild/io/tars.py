"""Deterministic tar streams: the one place that decides what a normalised entry looks like.

Every tar enginebuild writes (build contexts, source trees, layers) and every layer it
rewrites after a build goes through `normal_info`: the name without `./` or `/`, the
given time stamp, numeric owner (root unless a command chose another), no owner names,
permission bits only, and PAX headers only for extended attributes and long names.
Entries are written in the order given; `write_sorted` sorts them first.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol, cast

from enginebuild.errors import EngineBuildError
from enginebuild.io import faults
from enginebuild.io.background import stop_if_cancelled
from enginebuild.io.files import image_mode
from enginebuild.io.tarrules import clean_name

FORMAT = tarfile.PAX_FORMAT
_KEEP_PAX = ("SCHILY.xattr.",)  # file capabilities and ACLs mean something; times and names do not


# what layer clean-up drops from a layer a command wrote and from a component's outputs (build/
# normalize.py): leftovers that differ from run to run and that nothing needs
def normal_info(name: str, kind: bytes = tarfile.REGTYPE, *, size: int = 0, mode: int = 0o644, mtime: int = 0,
                uid: int = 0, gid: int = 0, linkname: str = "", pax: Mapping[str, str] | None = None) -> tarfile.TarInfo:
    info = tarfile.TarInfo(clean_name(name))
    info.type = kind
    info.size = size if kind in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
    info.mode = mode & 0o7777
    info.mtime = int(mtime)
    info.uid, info.gid = int(uid), int(gid)
    info.uname = info.gname = ""
    info.linkname = clean_name(linkname) if kind == tarfile.LNKTYPE else linkname
    info.pax_headers = {k: v for k, v in (pax or {}).items() if k.startswith(_KEEP_PAX)}
    if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor = info.devminor = 0
    return info


def renormalize(member: tarfile.TarInfo, mtime: int) -> tarfile.TarInfo:
    """A member as read from some tar, rewritten to the rules above (ownership kept)."""
    info = normal_info(member.name, member.type, size=member.size, mode=member.mode, mtime=mtime,
                       uid=member.uid, gid=member.gid, linkname=member.linkname, pax=member.pax_headers)
    if member.type in (tarfile.CHRTYPE, tarfile.BLKTYPE):
        info.devmajor, info.devminor = member.devmajor, member.devminor
    return info


def parents(name: str) -> list[str]:
    parts = clean_name(name).split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


class Writable(Protocol):
    """Where a tar is written: a file, or a writer that hashes what passes (io/store.HashingWriter)."""

    def write(self, data: bytes, /) -> int: ...


class _Sink:
    """The stream a TarWriter writes to, counting what it was given (tarfile asks where it is).
    After the stream failed (a full disk) or was closed while an error unwound, the tar's closing
    blocks are dropped instead of raising a second error over the first; on the normal path every
    write goes through."""

    def __init__(self, raw: Writable):
        self.raw = raw
        self.failed = False
        self.written = 0

    def write(self, data: bytes) -> int:
        self.written += len(data)
        if self.failed or getattr(self.raw, "closed", False):
            return len(data)
        try:
            return self.raw.write(data)
        except (OSError, ValueError):  # ValueError: written to a file an unwinding error closed
            self.failed = True
            raise

    def tell(self) -> int:
        return self.written


class TarWriter:
    """Writes normalised entries; with `implied_dirs`, a folder entry precedes its first file
    (build contexts want them; layers do not, so a layer never resets the mode of /tmp)."""

    def __init__(self, fileobj: Writable, *, mtime: int = 0, implied_dirs: bool = False):
        # written in order, never sought back: the plain mode writes what the stream mode ("w|")
        # writes, without its 10 KB re-buffering, and copies file contents 1 MiB at a time
        self.tar = tarfile.TarFile(fileobj=cast(Any, _Sink(fileobj)), mode="w", format=FORMAT, copybufsize=1 << 20)
        self.mtime = mtime
        self.implied_dirs = implied_dirs
        self.dirs: set[str] = set()

    def _implied(self, name: str) -> None:
        faults.reached("tar.entry", name)  # tests: a signal while a layer or context is written
        if not self.implied_dirs:
            return
        for parent in parents(name):
            if parent not in self.dirs:
                self.dirs.add(parent)
                self.tar.addfile(normal_info(parent, tarfile.DIRTYPE, mode=0o755, mtime=self.mtime))

    def add_bytes(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._implied(name)
        self.tar.addfile(normal_info(name, size=len(data), mode=mode, mtime=self.mtime), io.BytesIO(data))

    def add_file(self, name: str, path: Path, mode: int = 0o644) -> None:
        self._implied(name)
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            self.tar.addfile(normal_info(name, size=size, mode=mode, mtime=self.mtime), handle)

    def add_stream(self, name: str, handle: IO[bytes], size: int, mode: int = 0o644) -> None:
        self._implied(name)
        self.tar.addfile(normal_info(name, size=size, mode=mode, mtime=self.mtime), handle)

    def add_dir(self, name: str, mode: int = 0o755) -> None:
        self._implied(name)
        if clean_name(name) not in self.dirs:
            self.dirs.add(clean_name(name))
            self.tar.addfile(normal_info(name, tarfile.DIRTYPE, mode=mode, mtime=self.mtime))

    def add_symlink(self, name: str, target: str) -> None:
        self._implied(name)
        self.tar.addfile(normal_info(name, tarfile.SYMTYPE, mode=0o777, mtime=self.mtime, linkname=target))

    def add_member(self, member: tarfile.TarInfo, handle: IO[bytes] | None) -> None:
        """A member of another tar, normalised (its owner kept)."""
        stop_if_cancelled()  # a layer of a package's thousands of members stops at the next one
        self._implied(member.name)
        self.tar.addfile(renormalize(member, self.mtime), handle)

    def close(self) -> None:
        self.tar.close()


@dataclass(frozen=True)
class FolderEntry:
    rel: str
    path: Path
    kind: str  # file | dir | symlink
    mode: int
    target: str = ""


def walk_folder(folder: Path) -> Iterator[FolderEntry]:
    """A folder's entries in sorted order; symlinks that leave the folder are refused."""
    folder = Path(folder)
    root = folder.resolve()
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        rel_dir = Path(dirpath).relative_to(folder)
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = (rel_dir / name).as_posix()
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(path)
                resolved = (path.parent / target).resolve()
                if resolved != root and root not in resolved.parents:
                    raise EngineBuildError(f"{path}: symlink leaves its folder ({target})")
                yield FolderEntry(rel, path, "symlink", 0o777, target)
            elif stat.S_ISDIR(st.st_mode):
                yield FolderEntry(rel, path, "dir", 0o755)
            elif stat.S_ISREG(st.st_mode):
                yield FolderEntry(rel, path, "file", image_mode(st.st_mode))


def write_folder(writer: TarWriter, folder: Path, prefix: str = "", entries: Iterable[FolderEntry] | None = None,
                 file_mode: int | None = None) -> None:
    """A folder under `prefix/` (no entry for the prefix itself unless given as a folder)."""
    base = clean_name(prefix)
    for entry in entries if entries is not None else walk_folder(folder):
        stop_if_cancelled()  # a cancelled run's writer stops here, its temporaries removed on the way out
        name = f"{base}/{entry.rel}" if base else entry.rel
        if entry.kind == "dir":
            writer.add_dir(name)
        elif entry.kind == "symlink":
            writer.add_symlink(name, entry.target)
        else:
            writer.add_file(name, entry.path, file_mode if file_mode is not None else entry.mode)


def folder_tar(folder: Path, prefix: str = "", mtime: int = 0) -> bytes:
    buffer = io.BytesIO()
    writer = TarWriter(buffer, mtime=mtime)
    write_folder(writer, folder, prefix)
    writer.close()
    return buffer.getvalue()
