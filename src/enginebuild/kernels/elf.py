"""Just enough ELF to tell whether a file carries CUDA device code, without running anything.

nvcc puts the fat binary of a host object in a section named `.nv_fatbin` (relocatable
objects: `__nv_relfatbin`). Reading the section headers costs a few kilobytes per file,
so every ELF file of a layer can be looked at; only those with device code go to cuobjdump.
Standard library only; works on any host for any target (aarch64 files on x86_64).
"""

from __future__ import annotations

import struct
from typing import IO

MAGIC = b"\x7fELF"
FATBIN_SECTIONS = (b".nv_fatbin", b"__nv_relfatbin")
_MAX_SECTIONS = 1 << 16


def is_elf(head: bytes) -> bool:
    return head[:4] == MAGIC


def section_names(handle: IO[bytes]) -> list[bytes]:
    """The section names of an ELF file (seekable); [] when it is not one or is malformed."""
    return [name for name, _, _ in sections(handle)]


def sections(handle: IO[bytes]) -> list[tuple[bytes, int, int]]:
    """(name, file offset, size) of each section of an ELF file (seekable); [] when malformed."""
    handle.seek(0)
    ident = handle.read(64)
    if len(ident) < 52 or not is_elf(ident) or ident[4] not in (1, 2) or ident[5] not in (1, 2):
        return []
    wide = ident[4] == 2
    order = "<" if ident[5] == 1 else ">"
    if wide:
        shoff, = struct.unpack_from(order + "Q", ident, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", ident, 0x3A)
    else:
        shoff, = struct.unpack_from(order + "I", ident, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", ident, 0x2E)
    if not shoff or not shnum or shnum > _MAX_SECTIONS or shstrndx >= shnum or shentsize < (64 if wide else 40):
        return []
    handle.seek(shoff)
    table = handle.read(shentsize * shnum)
    if len(table) < shentsize * shnum:
        return []

    def header(index: int) -> tuple[int, int, int]:
        """(name offset, file offset, size) of section `index`."""
        base = index * shentsize
        if wide:
            name, = struct.unpack_from(order + "I", table, base)
            offset, size = struct.unpack_from(order + "QQ", table, base + 0x18)
        else:
            name, = struct.unpack_from(order + "I", table, base)
            offset, size = struct.unpack_from(order + "II", table, base + 0x10)
        return name, offset, size

    _, str_offset, str_size = header(shstrndx)
    if str_size > 1 << 24:
        return []
    handle.seek(str_offset)
    strings = handle.read(str_size)
    out = []
    for index in range(shnum):
        start, offset, size = header(index)
        if start < len(strings):
            end = strings.find(b"\0", start)
            out.append((strings[start:end if end >= 0 else len(strings)], offset, size))
    return out


def has_device_code(handle: IO[bytes]) -> bool:
    return any(name in FATBIN_SECTIONS for name in section_names(handle))
