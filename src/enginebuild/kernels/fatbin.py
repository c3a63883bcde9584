"""The entries of a CUDA fat binary, read from their headers: kind, target, flags, PTX ISA.

cuobjdump lists a binary's cubins and PTX by file names that lose what verify needs: a
cubin built for a family (`code=sm_100f`) is listed as `sm_100`, and a PTX entry's ISA
version is not in its name. Both are in the fat binary's own entry headers (the section
`.nv_fatbin`, or `__nv_relfatbin` in relocatable objects): one or more containers (magic
0xBA55ED50, a 16-byte header, then entries), each entry a header naming its kind (1 PTX,
2 ELF), a version (for PTX: the ISA, 9.0 for CUDA 13.0), the target's compute capability,
and flags in which NVIDIA's tools mark arch-specific (`a`) and family (`f`) code. Read
against binaries built here with nvcc 13.0, 13.2 and 13.5 (tests/corpus/gpu), whose names
and targets are known. Standard library only; no payload is decompressed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO

from enginebuild.kernels.archs import Arch
from enginebuild.kernels.elf import FATBIN_SECTIONS, sections

MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2
FLAG_ARCH_SPECIFIC = 1 << 20
FLAG_FAMILY = 1 << 21
_MAX_ENTRIES = 1 << 16


@dataclass(frozen=True)
class Entry:
    kind: int  # KIND_PTX or KIND_ELF
    arch: Arch  # with its suffix: "a" arch-specific, "f" family
    version: tuple[int, int]  # a PTX entry's ISA version; an ELF entry's format version

    @property
    def ptx(self) -> bool:
        return self.kind == KIND_PTX


def _arch(code: int, flags: int) -> Arch:
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY else ""
    return Arch(code // 10, code % 10, suffix)


def parse(data: bytes) -> list[Entry]:
    """Every entry of every container in a fat-binary section's bytes."""
    out: list[Entry] = []
    at = 0
    while len(out) < _MAX_ENTRIES:
        at = data.find(struct.pack("<I", MAGIC), at)
        if at < 0 or at + 16 > len(data):
            return out
        _, _, header, size = struct.unpack_from("<IHHQ", data, at)
        pos, end = at + header, min(len(data), at + header + size)
        while pos + 48 <= end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, pos)
            if kind not in (KIND_PTX, KIND_ELF) or entry_header < 48:
                break
            minor, major, code = struct.unpack_from("<HHI", data, pos + 24)
            flags, = struct.unpack_from("<Q", data, pos + 40)
            out.append(Entry(kind, _arch(code, flags), (major, minor)))
            pos += entry_header + payload
        at = max(end, at + 4)
    return out


def entries(handle: IO[bytes]) -> list[Entry]:
    """The fat-binary entries of an ELF file (seekable); [] when it has none."""
    out = []
    for name, offset, size in sections(handle):
        if name in FATBIN_SECTIONS and 0 < size <= 1 << 31:
            handle.seek(offset)
            out += parse(handle.read(size))
    return out
