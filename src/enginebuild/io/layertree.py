"""Writing image layers into a folder of the host, as an engine stacks them, touching nothing else.

Each layer's whiteouts (`.wh.NAME`, `.wh..wh..opq`) first delete what the layers below wrote,
then its entries are written. Every path is taken literally under the folder: no symbolic
link is followed on the way (a folder, file or link in the way is replaced, as an overlay's
upper layer hides it), so nothing outside the folder is read or written. A hard link names a
file already written in the folder, never the host's. Modes are kept whole (setuid, setgid,
the sticky bit); owners when run as root; folders get their mode and time last. Devices and
fifos are left out, as Docker's `--output type=local` leaves them.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from enginebuild.errors import BuildFailed
from enginebuild.io.tarrules import clean_name

OPAQUE = ".wh..wh..opq"


class LayerTree:
    """A folder that layers are written into, one after the other (`add`), then `finish`ed."""

    def __init__(self, root: Path, what: str = "--output"):
        self.root, self.what = Path(root), what
        self.folders: dict[str, tarfile.TarInfo] = {}  # folder entries: mode and time set last
        self.as_root = hasattr(os, "geteuid") and os.geteuid() == 0

    # -- paths ---------------------------------------------------------------------------------
    def _parent(self, name: str) -> Path:
        """The folder that holds `name`, made of real folders all the way down (never a link)."""
        here = self.root
        for part in name.split("/")[:-1]:
            if part in ("", ".", ".."):
                raise BuildFailed(f"{self.what}: entry {name!r} leaves the folder")
            here = here / part
            try:
                mode = os.lstat(here).st_mode
            except FileNotFoundError:
                os.mkdir(here, 0o755)
                continue
            if not stat.S_ISDIR(mode):
                os.unlink(here)  # a file or link where a layer has a folder: the folder wins
                os.mkdir(here, 0o755)
        return here

    def _path(self, name: str) -> Path:
        base = name.rsplit("/", 1)[-1]
        if base in ("", ".", ".."):
            raise BuildFailed(f"{self.what}: entry {name!r} leaves the folder")
        return self._parent(name) / base

    def _existing(self, name: str) -> Path | None:
        """`name`'s path when every folder on the way is a real folder already written, else None
        (and None for a name whose last part is no file name: never the folder itself or above)."""
        here = self.root
        for part in name.split("/")[:-1]:
            here = here / part
            if part in ("", ".", "..") or not stat.S_ISDIR(_mode(here)):
                return None
        base = name.rsplit("/", 1)[-1]
        return None if base in ("", ".", "..") else here / base

    @staticmethod
    def _remove(path: Path) -> None:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISDIR(mode):
            shutil.rmtree(path)
        else:
            os.unlink(path)

    # -- layers ----------------------------------------------------------------------------------
    def add(self, layer: IO[bytes] | Path) -> None:
        """One layer (a tar, uncompressed, seekable): its whiteouts, then its entries. A sparse
        entry is refused: what it would write is not bounded by the layer's own bytes (no layer an
        engine or enginebuild writes holds one)."""
        with (tarfile.open(layer, "r:") if isinstance(layer, Path) else tarfile.open(fileobj=layer, mode="r:")) as tar:
            members = [m for m in tar.getmembers() if clean_name(m.name) not in ("", ".")]
            sparse = next((m for m in members if m.issparse()), None)
            if sparse is not None:
                raise BuildFailed(f"{self.what}: entry {clean_name(sparse.name)!r} is a sparse file of {sparse.size} "
                                  "bytes; refused, nothing was written",
                                  hint="a layer (or a build's outputs) that an engine or enginebuild wrote holds no "
                                       "sparse entry: this one came from elsewhere")
            self._whiteouts(members)
            for member in members:
                if not member.name.rsplit("/", 1)[-1].startswith(".wh."):
                    self._entry(tar, member)

    def _whiteouts(self, members: Iterable[tarfile.TarInfo]) -> None:
        for member in members:
            name = clean_name(member.name)
            folder, _, base = name.rpartition("/")
            if base.startswith(".wh.") and base != OPAQUE and base[4:] in ("", ".", ".."):
                raise BuildFailed(f"{self.what}: entry {name!r} would delete {base[4:]!r}, which names no file "
                                  "in its folder; nothing was written outside the folder",
                                  hint="a layer (or a build's outputs) holds a file named like a whiteout of . or ..")
            if base == OPAQUE:
                found = self._existing(name)
                if found is not None:
                    for child in os.listdir(found.parent):
                        self._remove(found.parent / child)
            elif base.startswith(".wh."):
                found = self._existing(f"{folder}/{base[4:]}" if folder else base[4:])
                if found is not None:
                    self._remove(found)

    def _entry(self, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
        name = clean_name(member.name)
        path = self._path(name)
        if member.isdir():
            if not os.path.isdir(path) or os.path.islink(path):
                self._remove(path)
                os.mkdir(path, 0o755)
            self.folders[name] = member
            return
        if member.isdev() or member.isfifo():
            return
        self._remove(path)
        self.folders.pop(name, None)
        if member.issym():
            os.symlink(member.linkname, path)
        elif member.islnk():
            self._link(member, path)
            return  # the file it names has its mode and owner already
        elif member.isreg():
            handle = tar.extractfile(member)
            assert handle is not None
            with open(path, "xb") as out:
                shutil.copyfileobj(handle, out, 1 << 20)
        else:
            return
        self._attributes(path, member)

    def _link(self, member: tarfile.TarInfo, path: Path) -> None:
        target_name = clean_name(member.linkname)
        target = self._path(target_name)
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            raise BuildFailed(f"{self.what}: {member.name} is a hard link to {member.linkname}, which no layer "
                              "below it holds") from None
        if not stat.S_ISREG(mode):
            raise BuildFailed(f"{self.what}: {member.name} is a hard link to {member.linkname}, which is not a file")
        os.link(target, path, follow_symlinks=False)

    def _attributes(self, path: Path, member: tarfile.TarInfo) -> None:
        link = member.issym()
        if self.as_root:
            os.lchown(path, member.uid, member.gid)  # before the mode: a change of owner clears setuid
        if not link:
            os.chmod(path, member.mode & 0o7777)
        os.utime(path, (member.mtime, member.mtime), follow_symlinks=not link)

    def finish(self) -> None:
        """Folders' owners, modes and times, deepest first (a folder's time moves as it fills)."""
        for name in sorted(self.folders, key=lambda n: n.count("/"), reverse=True):
            path = self.root / name
            if os.path.isdir(path) and not os.path.islink(path):
                self._attributes(path, self.folders[name])


def _mode(path: Path) -> int:
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return 0
