"""Find the CUDA binaries in layers (uncompressed tars) or wheels (zips) and check each one's
device code against the declared architectures.

Every regular file is looked at; an ELF file with a fat-binary section (see elf.py) is
handed to cuobjdump. In layers, later layers win: a file replaced or deleted (whiteout)
by a later layer is judged as the image has it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from enginebuild.core.cudacompat import driver_cuda, library_problem, ptx_loads
from enginebuild.kernels.archs import Arch, Declared, missing, parse_code
from enginebuild.kernels.cuobjdump import Cuobjdump, DeviceCode
from enginebuild.kernels.elf import has_device_code, is_elf
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    from enginebuild.io.store import Store


@dataclass(frozen=True)
class Skip:
    pattern: str
    why: str


@dataclass
class Rules:
    declared: list[Declared]
    jit: bool = False
    skip: tuple[Skip, ...] = ()
    driver: int | None = None  # the driver branch the image targets (580); None: not stated

    def skipped(self, path: str) -> Skip | None:
        return next((s for s in self.skip if fnmatch.fnmatch(path, s.pattern)), None)

    @property
    def cuda(self) -> tuple[int, int] | None:
        return driver_cuda(self.driver) if self.driver is not None else None


@dataclass
class FileReport:
    path: str
    where: str  # the layer (or wheel) it came from
    code: DeviceCode
    declared: list[Declared]
    missing: list[Declared] = field(default_factory=list)
    skipped: str = ""  # why, when a skip rule matched
    problem: str = ""  # a CUDA library the target driver cannot run (core/cudacompat.py)
    too_new: list[str] = field(default_factory=list)  # PTX entries the target driver cannot compile

    @property
    def ok(self) -> bool:
        return (not self.missing and not self.problem) or bool(self.skipped)

    def to_json(self) -> JsonDoc:
        return {"path": self.path, "from": self.where, "sass": [a.sass for a in self.code.sass],
                "ptx": [a.ptx for a in self.code.ptx],
                "ptx_isa": {a.ptx: f"{v[0]}.{v[1]}" for a, v in self.code.ptx_isa},
                "declared": [str(d) for d in self.declared], "missing": [str(d) for d in self.missing],
                "ok": self.ok, **({"skipped": self.skipped} if self.skipped else {}),
                **({"problem": self.problem} if self.problem else {}),
                **({"ptx_too_new": self.too_new} if self.too_new else {})}

    def describe(self) -> str:
        if self.problem:
            return f"{self.path}: {self.problem}" + (f" (not checked: {self.skipped})" if self.skipped else "")
        has = " ".join(a.sass for a in self.code.sass) or "no SASS"
        ptx = " ".join(a.ptx + (f" (ISA {v[0]}.{v[1]})" if (v := self.code.isa_of(a)) else "")
                       for a in self.code.ptx)
        text = f"{self.path}: {has}" + (f"; PTX {ptx}" if ptx else "; no PTX")
        if self.too_new:
            text += f"; the target driver cannot compile {', '.join(self.too_new)}"
        if self.skipped:
            return f"{text} (not checked: {self.skipped})"
        if self.missing:
            return f"{text} -- MISSING {', '.join(str(m) for m in self.missing)}"
        return text


def judge(path: str, where: str, code: DeviceCode, rules: Rules) -> FileReport:
    cuda = rules.cuda

    def loadable(ptx: Arch) -> bool:
        isa = code.isa_of(ptx)
        return cuda is None or isa is None or ptx_loads(isa, cuda)

    report = FileReport(path, where, code, rules.declared,
                        missing(rules.declared, list(code.sass), list(code.ptx), jit=rules.jit, loadable=loadable))
    if cuda is not None:
        report.too_new = [f"{a.ptx} (ISA {v[0]}.{v[1]}; driver {rules.driver} compiles up to CUDA "
                          f"{cuda[0]}.{cuda[1]}'s)" for a in code.ptx if not loadable(a) and (v := code.isa_of(a))]
    skip = rules.skipped(path)
    if skip is not None:
        report.skipped = skip.why
    return report


def judge_library(path: str, where: str, rules: Rules) -> FileReport | None:
    """A CUDA runtime library the image ships, against the target driver (minor version compatibility)."""
    cuda = rules.cuda
    problem = library_problem(os.path.basename(path), cuda) if cuda is not None else None
    if problem is None:
        return None
    report = FileReport(path, where, DeviceCode((), ()), rules.declared, problem=problem)
    skip = rules.skipped(path)
    if skip is not None:
        report.skipped = skip.why
    return report


CODE_RECORD = "v2"  # what a kept verdict holds: records of another reader are not taken


class Reader:
    """Device code of an image's binaries, read once per file content: what a file carries is
    kept by its sha256, or by the stored layer's sha256 and its path there (in the store, with
    the tool's identity), and cuobjdump runs side by side."""

    def __init__(self, tool: Cuobjdump, store: Store | None = None, jobs: int | None = None):
        self.tool, self.store = tool, store
        self.pool = ThreadPoolExecutor(max_workers=jobs or max(2, os.cpu_count() or 2))
        self.folder = Path(tempfile.mkdtemp(prefix="enginebuild-verify-"))
        self.count = 0

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        shutil.rmtree(self.folder, ignore_errors=True)

    def submit(self, handle: IO[bytes], identity: str | None = None) -> Future[DeviceCode | None]:
        """The device code of a (seekable) file, now or later; None when it has none. `identity`
        names the bytes when they are content-addressed already (a stored layer's sha256 and the
        path in it): then nothing is read to know them. Otherwise, or when that name is new (a new
        layer whose binaries another layer had: a package rebuilt around a release's kernels),
        the bytes are hashed and what is kept for them is used."""
        done: Future[DeviceCode | None] = Future()
        if not has_device_code(handle):
            done.set_result(None)
            return done
        named = self._kept(identity) if identity is not None else None
        if named is not None:  # read before: nothing written, nothing run
            done.set_result(code_from_json(named[1]))
            return done
        self.count += 1
        path = self.folder / f"binary-{self.count}"
        digest = hashlib.sha256()
        handle.seek(0)
        with open(path, "wb") as sink:
            while block := handle.read(1 << 20):
                digest.update(block)
                sink.write(block)
        keys = [self._key(digest.hexdigest())] + ([self._key(identity)] if identity is not None else [])
        same = self._kept(digest.hexdigest())
        if same is not None:  # these bytes were read under another name
            path.unlink(missing_ok=True)
            self._keep(keys, same[1])
            done.set_result(code_from_json(same[1]))
            return done

        def read() -> DeviceCode | None:
            try:
                code = self.tool.device_code(path)
            finally:
                path.unlink(missing_ok=True)
            self._keep(keys, code_to_json(code))
            return code

        return self.pool.submit(read)

    def _key(self, identity: str) -> str:
        return hashlib.sha256(f"{identity}-{CODE_RECORD}-{self.tool.path.parent.name}".encode()).hexdigest()

    def _kept(self, identity: str) -> tuple[str, JsonDoc] | None:
        key = self._key(identity)
        kept = self.store.record("device-code", key) if self.store is not None else None
        return (key, kept) if kept is not None else None

    def _keep(self, keys: list[str], code: JsonDoc) -> None:
        if self.store is not None:
            for key in keys:
                self.store.put_record("device-code", key, code)


def code_to_json(code: DeviceCode) -> JsonDoc:
    return {"sass": [a.sass for a in code.sass], "ptx": [a.ptx for a in code.ptx],
            "ptx_isa": [[a.ptx, list(v)] for a, v in code.ptx_isa]}


def code_from_json(data: JsonDoc) -> DeviceCode:
    def arch(name: str) -> Arch:
        parsed = parse_code(name)
        assert parsed is not None
        return parsed

    return DeviceCode(tuple(arch(a) for a in data["sass"]), tuple(arch(a) for a in data["ptx"]),
                      tuple((arch(a), (int(v[0]), int(v[1]))) for a, v in data.get("ptx_isa", ())))


def scan_layers(layers: Iterable[tuple[str, Path, Rules]], tool: Cuobjdump, store: Store | None = None) -> list[FileReport]:
    """`layers`: (name, uncompressed tar, rules for its files), bottom first."""
    found: dict[str, tuple[str, Rules, Future[DeviceCode | None]] | FileReport] = {}
    reader = Reader(tool, store)
    try:
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
                    library = judge_library(path, layer, rules)
                    if library is not None:
                        found[path] = library
                        continue
                    handle = tar.extractfile(member)
                    if handle is None or not is_elf(handle.read(4)):
                        continue
                    found[path] = (layer, rules, reader.submit(handle, f"{Path(tar_path).name}:{member.name}"))
        reports = []
        for path, item in found.items():
            if isinstance(item, FileReport):
                reports.append(item)
                continue
            layer, rules, future = item
            code = future.result()
            if code is not None:
                reports.append(judge(path, layer, code, rules))
    finally:
        reader.close()
    return sorted(reports, key=lambda r: r.path)


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
