"""Small ELF files made byte by byte for the runtime-closure tests: an executable or a shared
library for x86_64 or aarch64 with the interpreter, DT_NEEDED, DT_SONAME, DT_RPATH and
DT_RUNPATH asked, laid out as a linker would (one PT_LOAD over the file, PT_DYNAMIC,
PT_INTERP). Nothing runs them; the loader model reads them."""

from __future__ import annotations

import struct

MACHINE = {"amd64": 62, "arm64": 183}


def make_elf(arch: str = "amd64", *, needed: tuple[str, ...] = (), soname: str = "", runpath: str = "",
             rpath: str = "", interp: str = "", executable: bool = False, extra: bytes = b"") -> bytes:
    strings = bytearray(b"\0")

    def add(text: str) -> int:
        at = len(strings)
        strings.extend(text.encode() + b"\0")
        return at

    dyn: list[tuple[int, int]] = [(1, add(n)) for n in needed]
    if soname:
        dyn.append((14, add(soname)))
    if rpath:
        dyn.append((15, add(rpath)))
    if runpath:
        dyn.append((29, add(runpath)))
    headers = 3 if interp else 2
    phoff = 64
    interp_at = phoff + 56 * headers
    interp_bytes = interp.encode() + b"\0" if interp else b""
    strtab_at = interp_at + len(interp_bytes)
    dynamic_at = strtab_at + len(strings)
    dynamic_at += (-dynamic_at) % 8
    dyn += [(5, strtab_at), (10, len(strings)), (0, 0)]
    dynamic = b"".join(struct.pack("<qQ", t, v) for t, v in dyn)
    end = dynamic_at + len(dynamic) + len(extra)
    kind = 2 if executable else 3
    head = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    head += struct.pack("<HHIQQQIHHHHHH", kind, MACHINE[arch], 1, 0, phoff, 0, 0, 64, 56, headers, 64, 0, 0)
    phdrs = b""
    if interp:
        phdrs += struct.pack("<IIQQQQQQ", 3, 4, interp_at, interp_at, interp_at, len(interp_bytes),
                             len(interp_bytes), 1)
    phdrs += struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, end, end, 0x1000)
    phdrs += struct.pack("<IIQQQQQQ", 2, 6, dynamic_at, dynamic_at, dynamic_at, len(dynamic), len(dynamic), 8)
    body = head + phdrs + interp_bytes + bytes(strings)
    body += bytes(dynamic_at - len(body))
    return body + dynamic + extra
