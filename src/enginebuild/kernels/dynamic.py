"""What the dynamic loader reads of an ELF file: its machine, its interpreter, the libraries it
needs (DT_NEEDED), its own name (DT_SONAME) and where it asks to be searched (DT_RPATH,
DT_RUNPATH). Read from the program headers and the dynamic segment, never run: works on any
host for any target (aarch64 files on x86_64). Standard library only.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO

from enginebuild.kernels.elf import is_elf
from enginebuild.wire import JsonDoc

ET_EXEC, ET_DYN = 2, 3
PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
_MAX_HEADERS = 1 << 12
_MAX_STRINGS = 1 << 24
_MAX_NAME = 4096  # bytes of one name or path list read from the string table (PATH_MAX)


@dataclass(frozen=True)
class Linkage:
    """An executable or shared library, as the loader sees it."""

    machine: int
    wide: bool  # ELFCLASS64
    interp: str = ""  # PT_INTERP: set on (dynamically linked) executables
    soname: str = ""
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    damaged: str = ""  # why the loader would refuse the file (a dynamic segment outside it, ...)

    def to_json(self) -> JsonDoc:
        return {"m": self.machine, "w": self.wide, "i": self.interp, "s": self.soname, "n": list(self.needed),
                "rp": list(self.rpath), "ru": list(self.runpath), **({"d": self.damaged} if self.damaged else {})}

    @staticmethod
    def from_json(doc: JsonDoc) -> Linkage:
        return Linkage(int(doc["m"]), bool(doc["w"]), str(doc["i"]), str(doc["s"]), tuple(doc["n"]),
                       tuple(doc["rp"]), tuple(doc["ru"]), str(doc.get("d", "")))


def read_linkage(handle: IO[bytes]) -> Linkage | None:
    """The linkage of an executable or shared object (seekable); None for anything else (not ELF,
    a relocatable object, a core file, malformed headers)."""
    size = handle.seek(0, 2)
    handle.seek(0)
    head = handle.read(64)
    if len(head) < 52 or not is_elf(head) or head[4] not in (1, 2) or head[5] not in (1, 2):
        return None
    wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
    kind, machine = struct.unpack_from(order + "HH", head, 0x10)
    if kind not in (ET_EXEC, ET_DYN):
        return None
    if wide:
        phoff, = struct.unpack_from(order + "Q", head, 0x20)
        phentsize, phnum = struct.unpack_from(order + "HH", head, 0x36)
    else:
        phoff, = struct.unpack_from(order + "I", head, 0x1C)
        phentsize, phnum = struct.unpack_from(order + "HH", head, 0x2A)
    if not phoff or phnum > _MAX_HEADERS or phentsize < (56 if wide else 32):
        return None
    handle.seek(phoff)
    table = handle.read(phentsize * phnum)
    if len(table) < phentsize * phnum:
        return None
    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
    dynamic: tuple[int, int] | None = None
    interp = ""
    for index in range(phnum):
        if wide:
            ptype, _, offset, vaddr, _, filesz = struct.unpack_from(order + "IIQQQQ", table, index * phentsize)
        else:
            ptype, offset, vaddr, _, filesz = struct.unpack_from(order + "IIIII", table, index * phentsize)
        if ptype == PT_LOAD:
            loads.append((vaddr, offset, filesz))
        elif ptype == PT_DYNAMIC:
            dynamic = (offset, filesz)
        elif ptype == PT_INTERP and filesz < 4096:
            handle.seek(offset)
            interp = handle.read(filesz).split(b"\0", 1)[0].decode("utf-8", "replace")
    base = Linkage(machine, wide, interp)
    if dynamic is None:
        return base  # statically linked: needs nothing
    if dynamic[0] + dynamic[1] > size:
        return Linkage(machine, wide, interp, damaged=f"its dynamic segment ({dynamic[1]} bytes at {dynamic[0]}) "
                                                      f"lies past the end of the file ({size} bytes)")
    entries = _entries(handle, dynamic, wide, order)
    strtab = next((v for t, v in entries if t == DT_STRTAB), None)
    strsz = next((v for t, v in entries if t == DT_STRSZ), 0)
    offset = next((o + strtab - a for a, o, n in loads if strtab is not None and a <= strtab < a + n), None)
    if offset is None or strsz > _MAX_STRINGS or offset + strsz > size:
        needs = any(t in (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH) for t, _ in entries)
        return Linkage(machine, wide, interp, damaged="its string table lies outside the file" if needs else "")
    handle.seek(offset)
    strings = handle.read(strsz)

    read: dict[int, str] = {}

    def text(at: int, limit: int = len(strings)) -> str:
        """The string at `at`, read no further than `limit` bytes, each offset once."""
        if at not in read:
            end = strings.find(b"\0", at, at + limit)
            read[at] = strings[at:end if end >= 0 else min(len(strings), at + limit)].decode(
                "utf-8", "replace") if at < len(strings) else ""
        return read[at]

    def last(tag: int) -> str:
        """glibc keeps the last entry of a tag that has one slot (SONAME, RPATH, RUNPATH)."""
        return next((text(v) for t, v in reversed(entries) if t == tag), "")

    def paths(tag: int) -> tuple[str, ...]:  # each folder once, in order: the loader's search is the same
        return tuple(dict.fromkeys(p for p in last(tag).split(":") if p))

    # a needed name is a file name (at most _MAX_NAME bytes read), each once: many entries naming one
    # long string cost its length once
    needed = tuple(dict.fromkeys(text(v, _MAX_NAME) for t, v in entries if t == DT_NEEDED))
    return Linkage(machine, wide, interp, last(DT_SONAME), needed, paths(DT_RPATH), paths(DT_RUNPATH))


def _entries(handle: IO[bytes], dynamic: tuple[int, int], wide: bool, order: str) -> list[tuple[int, int]]:
    offset, size = dynamic
    step = 16 if wide else 8
    handle.seek(offset)
    data = handle.read(min(size, 1 << 20))
    out = []
    for at in range(0, len(data) - step + 1, step):
        tag, value = struct.unpack_from(order + ("qQ" if wide else "iI"), data, at)
        if tag == DT_NULL:
            break
        out.append((tag, value))
    return out
