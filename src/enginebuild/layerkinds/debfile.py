"""Reading .deb files without dpkg: an `ar` archive whose data.tar.* holds the files.

Used to unpack system packages into a layer for images built FROM scratch.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path

from enginebuild.errors import FetchError
from enginebuild.io.tarrules import clean_name
from enginebuild.io.tars import TarWriter
from enginebuild.io.unpack import Budget, is_disk_full

_AR_MAGIC = b"!<arch>\n"


def ar_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    if not data.startswith(_AR_MAGIC):
        raise ValueError("not an ar archive")
    offset = len(_AR_MAGIC)
    while offset + 60 <= len(data):
        header = data[offset: offset + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        start = offset + 60
        yield name, data[start: start + size]
        offset = start + size + (size % 2)


def data_tar(deb: Path) -> tarfile.TarFile:
    raw = deb.read_bytes()
    try:
        for name, payload in ar_members(raw):
            if name.startswith("data.tar"):
                if name.endswith(".zst"):
                    raise FetchError(f"{deb.name}: zstd-compressed packages cannot be unpacked here",
                                     hint="use `system.install: dpkg` on a base that has dpkg")
                return tarfile.open(fileobj=io.BytesIO(payload), mode="r:*")
    except (ValueError, tarfile.TarError, EOFError) as exc:
        raise FetchError(f"{deb.name}: not a readable .deb ({exc})") from None
    raise FetchError(f"{deb.name}: no data.tar member")


def write_sysroot(debs: list[tuple[Path, str]], writer: TarWriter) -> None:
    """Unpack .debs, in the order given, as one root filesystem owned by root."""
    seen_dirs: set[str] = set()
    for deb, what in debs:
        budget = Budget(f"{what} ({deb.name})", deb.stat().st_size)
        try:
            with data_tar(deb) as tar_in:
                for member in tar_in:
                    budget.take(member.size if member.isreg() else 0)
                    name = clean_name(member.name)
                    if not name or ".." in name.split("/"):
                        continue
                    if member.isdir():
                        if name in seen_dirs:
                            continue
                        seen_dirs.add(name)
                    member.name = name
                    if member.islnk():
                        member.linkname = clean_name(member.linkname)
                    member.uid = member.gid = 0
                    writer.add_member(member, tar_in.extractfile(member) if member.isreg() else None)
        except (tarfile.TarError, EOFError, OSError) as exc:
            if is_disk_full(exc):
                raise  # the disk is full, the package is not to blame (io/store.py names the disk)
            raise FetchError(f"{what}: cannot unpack {deb.name}: {exc}") from None
