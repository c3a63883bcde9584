"""Reading .deb files without dpkg: an `ar` archive whose data.tar.* holds the files.

Used to unpack system packages into a root filesystem for images built FROM scratch.
"""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

from enginebuild.errors import FetchError

_AR_MAGIC = b"!<arch>\n"


def ar_members(data: bytes):
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
    except (ValueError, tarfile.TarError) as exc:
        raise FetchError(f"{deb.name}: not a readable .deb ({exc})") from None
    raise FetchError(f"{deb.name}: no data.tar member")


def _clean(name: str) -> str:
    name = name[2:] if name.startswith("./") else name
    return name.rstrip("/")


def write_sysroot(debs: list, out) -> None:
    """Unpack .debs, in the order given, into one tar of a root filesystem, owned by root."""
    tar_out = tarfile.open(fileobj=out, mode="w|", format=tarfile.GNU_FORMAT)
    seen_dirs: set = set()
    for deb in debs:
        with data_tar(deb) as tar_in:
            for member in tar_in:
                name = _clean(member.name)
                if not name or name.startswith("/") or ".." in name.split("/"):
                    continue
                if member.isdir():
                    if name in seen_dirs:
                        continue
                    seen_dirs.add(name)
                member.name = name
                if member.islnk():
                    member.linkname = _clean(member.linkname)
                member.uid = member.gid = 0
                member.uname = member.gname = "root"
                member.mode &= 0o7777
                fileobj = tar_in.extractfile(member) if member.isreg() else None
                tar_out.addfile(member, fileobj)
    tar_out.close()
