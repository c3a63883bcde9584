"""Find the CUDA binaries in layers (uncompressed tars) or wheels (zips) and check each one's
device code against the declared architectures.

Every regular file is looked at; an ELF file with a fat-binary section (see elf.py) is
handed to cuobjdump. In layers, later layers win: a file replaced or deleted (whiteout)
by a later layer is judged as the image has it.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from enginebuild.kernels.archs import Declared, missing
from enginebuild.kernels.cuobjdump import Cuobjdump, DeviceCode
from enginebuild.kernels.elf import has_device_code, is_elf


@dataclass(frozen=True)
class Skip:
    pattern: str
    why: str


@dataclass
class Rules:
    declared: list[Declared]
    jit: bool = False
    skip: tuple[Skip, ...] = ()

    def skipped(self, path: str) -> Skip | None:
        return next((s for s in self.skip if fnmatch.fnmatch(path, s.pattern)), None)


@dataclass
class FileReport:
    path: str
    where: str  # the layer (or wheel) it came from
    code: DeviceCode
    declared: list[Declared]
    missing: list[Declared] = field(default_factory=list)
    skipped: str = ""  # why, when a skip rule matched

    @property
    def ok(self) -> bool:
        return not self.missing or bool(self.skipped)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "from": self.where, "sass": [a.sass for a in self.code.sass],
                "ptx": [a.ptx for a in self.code.ptx], "declared": [str(d) for d in self.declared],
                "missing": [str(d) for d in self.missing], "ok": self.ok,
                **({"skipped": self.skipped} if self.skipped else {})}

    def describe(self) -> str:
        has = " ".join(a.sass for a in self.code.sass) or "no SASS"
        ptx = " ".join(a.ptx for a in self.code.ptx)
        text = f"{self.path}: {has}" + (f"; PTX {ptx}" if ptx else "; no PTX")
        if self.skipped:
            return f"{text} (not checked: {self.skipped})"
        if self.missing:
            return f"{text} -- MISSING {', '.join(str(m) for m in self.missing)}"
        return text


def judge(path: str, where: str, code: DeviceCode, rules: Rules) -> FileReport:
    report = FileReport(path, where, code, rules.declared,
                        missing(rules.declared, list(code.sass), list(code.ptx), jit=rules.jit))
    skip = rules.skipped(path)
    if skip is not None:
        report.skipped = skip.why
    return report


@contextlib.contextmanager
def _on_disk(handle: IO[bytes]) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="enginebuild-verify-"))
    try:
        path = folder / "binary"
        with open(path, "wb") as sink:
            handle.seek(0)
            shutil.copyfileobj(handle, sink, 1 << 20)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _device_code(handle: IO[bytes], tool: Cuobjdump) -> DeviceCode | None:
    if not has_device_code(handle):
        return None
    with _on_disk(handle) as path:
        return tool.device_code(path)


def scan_layers(layers: Iterable[tuple[str, Path, Rules]], tool: Cuobjdump) -> list[FileReport]:
    """`layers`: (name, uncompressed tar, rules for its files), bottom first."""
    found: dict[str, FileReport] = {}
    for layer, tar_path, rules in layers:
        with tarfile.open(tar_path, "r:") as tar:
            for member in tar:
                entry = member.name[2:] if member.name.startswith("./") else member.name
                path = "/" + entry.lstrip("/")
                folder, base = os.path.split(path)
                if base.startswith(".wh."):
                    gone = os.path.join(folder, base[4:])
                    for key in [k for k in found if k == gone or k.startswith(gone + "/")]:
                        del found[key]
                    continue
                found.pop(path, None)
                if not member.isfile() or member.size < 64:
                    continue
                handle = tar.extractfile(member)
                if handle is None or not is_elf(handle.read(4)):
                    continue
                code = _device_code(handle, tool)
                if code is not None:
                    found[path] = judge(path, layer, code, rules)
    return sorted(found.values(), key=lambda r: r.path)


def scan_wheel(wheel: Path, rules: Rules, tool: Cuobjdump) -> list[FileReport]:
    """The CUDA binaries of a wheel, by their path inside it."""
    out = []
    with zipfile.ZipFile(wheel) as zipped:
        for info in zipped.infolist():
            if info.is_dir() or info.file_size < 64:
                continue
            with zipped.open(info) as member:
                if not is_elf(member.read(4)):
                    continue
            folder = Path(tempfile.mkdtemp(prefix="enginebuild-verify-"))
            try:
                path = folder / "binary"
                with zipped.open(info) as member, open(path, "wb") as sink:
                    shutil.copyfileobj(member, sink, 1 << 20)
                with open(path, "rb") as handle:
                    if not has_device_code(handle):
                        continue
                out.append(judge(info.filename, wheel.name, tool.device_code(path), rules))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    return out
