"""Bytecode for the Python files of the layers below: one layer of `.pyc` files per layer that
holds `.py` files, compiled by the image's own interpreter (layerkinds/pycompile.py, run in a
container of the chain below) and hash-based (PEP 552, checked), so a container imports without
compiling and no layer time can make a `.pyc` stale.

Each layer's bytecode is stored by what shapes it: that layer's bytes (its blob's sha256), the
interpreter's version and path, and this writer's code. A patch edit compiles the one layer it
changed; the others are taken from the store. The layers are placed in the order of their sources,
so where a later layer replaces a file its bytecode comes later too."""

from __future__ import annotations

import functools
import hashlib
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, ClassVar

from enginebuild.core import keys
from enginebuild.core.keys import unkeyed
from enginebuild.errors import BuildFailed
from enginebuild.io.tarrules import clean_name
from enginebuild.layerkinds.base import LayerPayload, WriteJob

if TYPE_CHECKING:
    from enginebuild.io.store import Store
    from enginebuild.io.tars import TarWriter

ROOT = ".enginebuild-bytecode"  # where the container is given the sources and leaves the bytecode
LIMIT_S = 3600.0
PYC_LIMIT = 256 << 20  # a single .pyc larger than this is not bytecode of a source we sent
TOTAL_LIMIT = 32 << 30  # nor all of them together, past this
HERE = Path(__file__).parent


@functools.cache
def _own_code() -> str:
    digest = hashlib.sha256()
    for name in ("bytecode.py", "pycompile.py", "pycgroups.py"):
        digest.update((HERE / name).read_bytes())
    digest.update((HERE.parent / "io" / "tars.py").read_bytes())
    return digest.hexdigest()


def safe_path(name: str) -> str | None:
    """`name` as a relative path in the image, or None for one that is not a plain file's."""
    path = clean_name(name)
    parts = path.split("/")
    if not path or any(p in ("", ".", "..") for p in parts) or any(ord(c) < 32 or c == "\x7f" for c in path):
        return None
    return path


@dataclass(frozen=True)
class Compiled:
    """What compiling one layer's sources gave: its bytecode layer (sha256 "" for none)."""

    sha256: str
    size: int
    compiled: int
    failed: int


@dataclass(frozen=True)
class Bytecode(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = ("layerkinds/pycompile.py", "layerkinds/pycgroups.py", "io/tars.py")
    reads_chain: ClassVar[bool] = True
    sources: tuple[str, ...]  # the record keys of the layers it compiles, in chain order
    names: tuple[str, ...] = field(metadata=unkeyed("the layers' names, for messages"))
    version: str  # the interpreter's major.minor, which its .pyc's magic number follows
    interpreter: str
    volatile: tuple[bool, ...] = ()  # per source: an edit touches it (patches as files, overlays): a layer alone
    at: str = field(default="", metadata=unkeyed(
        "where the compiler runs, not what it writes: the bytecode depends on the sources and the interpreter"))

    def reads_below(self) -> str:
        return self.at

    def engine_files(self) -> bool:
        return False  # derived from the layers below, which the checks read

    def stands_alone(self) -> bool:
        return False  # the interpreter is the chain's

    def chain_work(self) -> str:
        return f"compiled by the image's {self.interpreter}"

    def compiler(self) -> str:
        return f"{self.interpreter} (Python {self.version}, checked hashes)"

    def describe(self, name: str, folder: str) -> str:
        return (f"# enginebuild: bytecode of the {len(self.sources)} layer(s) above, in few layers, compiled by "
                f"{self.interpreter} (Python {self.version}) with checked hashes (compileall "
                "--invalidation-mode checked-hash)")

    def sub_key(self, blob: str) -> str:
        return keys.key_of("bytecode", blob=blob, version=self.version, interpreter=self.interpreter,
                           writer=_own_code())

    def write_layers(self, job: WriteJob, mtime: int) -> list[tuple[str, int]]:
        from enginebuild.layerkinds.pycgroups import Part, packed

        store = job.store
        wanted: list[tuple[str, str, bool]] = []  # (the layer's name, its blob, volatile)
        volatile = self.volatile or (False,) * len(self.sources)
        for key, name, edited in zip(self.sources, self.names, volatile, strict=True):
            record = store.record("layers", key)
            if record is None:
                raise BuildFailed(f"layer {name} is not built (its bytecode is made from it)")
            wanted += [(name, str(sha), edited) for sha, _ in record["layers"]]
        missing = [(name, blob) for name, blob, _ in wanted if _compiled(store, self.sub_key(blob)) is None]
        compiled = not missing or self._compile(job, mtime, missing)
        if not compiled and job.whole_chain is not None:  # the interpreter is above where the plan looked
            job.chain_image, job.whole_chain = job.whole_chain(), None
            compiled = self._compile(job, mtime, missing)
        if not compiled:
            from enginebuild.io.progress import output

            output().say(f"  {job.name}: the image has no {self.interpreter} to compile its Python files with: "
                         "none shipped for the layers not compiled before")
        parts = []
        for _, blob, edited in wanted:
            done = _compiled(store, self.sub_key(blob))
            if done is not None and done.sha256:  # None: not compiled (no interpreter in the image)
                parts.append(Part(done.sha256, done.size, edited))
        return packed(store, parts, mtime, _own_code(), "bytecode")

    def _compile(self, job: WriteJob, mtime: int, missing: list[tuple[str, str]]) -> bool:
        """Compile what `missing` holds and record each part; False when the image has no interpreter."""
        from enginebuild.io.files import temp_path
        from enginebuild.io.tars import TarWriter

        store = job.store
        scratch = temp_path(store.home / "tmp", "bytecode", "d")
        scratch.mkdir(parents=True)
        try:
            sent = scratch / "in.tar"
            with open(sent, "wb") as handle:
                writer = TarWriter(handle, mtime=mtime, implied_dirs=True)
                writer.add_bytes(f"{ROOT}/pycompile.py", (HERE / "pycompile.py").read_bytes())
                counts = [_add_sources(store, writer, f"{ROOT}/src/{i:04d}", blob, name)
                          for i, (name, blob) in enumerate(missing)]
                writer.close()
            printed = self._run(job, sent, scratch) if any(counts) else b""
            if printed is None:
                return False
            reports = _reports(printed)
            for i, (name, blob) in enumerate(missing):
                folder = scratch / "out" / f"{i:04d}"
                report = reports.get(f"{i:04d}", Report())
                made = _layer_of(store, folder, mtime, f"bytecode of {name}") if folder.is_dir() else None
                store.put_record("bytecode", self.sub_key(blob), {
                    "sha256": made[0] if made else "", "size": made[1] if made else 0, "layer": name,
                    "compiled": report.compiled, "failed": report.failed, "first_failed": list(report.first_failed)})
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return True

    def _run(self, job: WriteJob, sent: Path, scratch: Path) -> bytes | None:
        """Compile what `sent` holds in a container of the chain below; what it printed (None: the
        image has no such interpreter, which the engine said when it could not start it)."""
        from enginebuild.errors import EngineBuildError

        if job.chain_image is None:
            raise BuildFailed(f"layer {job.name}: the chain below is not loaded")
        argv = [self.interpreter, f"/{ROOT}/pycompile.py", f"/{ROOT}", self.version]
        try:
            status, out, err = job.engine.run_with_files(job.chain_image, argv, LIMIT_S, sent, f"/{ROOT}/out",
                                                         lambda stream: _receive(stream, scratch))
        except EngineBuildError as exc:
            if self.interpreter in exc.message and "no such file" in exc.message:
                return None
            raise
        if status != 0:
            said = [r.error for r in _lines(out) if r.error]
            raise BuildFailed(f"layer {job.name}: {self.interpreter} could not compile the image's Python files: "
                              + (str(said[0]) if said else f"status {status}: "
                                 + (err or out).decode("utf-8", "replace").strip()[-300:]),
                              hint="set `bytecode: false` in the spec to ship no bytecode")
        return out


def _compiled(store: Store, key: str) -> Compiled | None:
    record = store.record("bytecode", key)
    if record is None:
        return None
    sha = str(record.get("sha256", ""))
    if sha and not store.intact(sha, f"bytecode of {record.get('layer', '')}"):
        return None
    return Compiled(sha, int(record.get("size", 0)), int(record.get("compiled", 0)), int(record.get("failed", 0)))


def _add_sources(store: Store, writer: TarWriter, into: str, blob: str, name: str) -> int:
    """The `.py` files of a layer (its blob) added under `into`; how many. A link (hard or symbolic,
    as Debian links sitecustomize.py into /etc) is its target's bytes at its own path, where
    Python looks for its bytecode, when the target is in the same layer."""
    count = 0
    with tarfile.open(store.whole(blob, name), "r:") as tar:
        members = {clean_name(m.name): m for m in tar.getmembers()}
        for path in sorted(members):
            if safe_path(path) is None or not path.endswith(".py") or path.rsplit("/", 1)[-1].startswith(".wh."):
                continue
            target = _resolved(members, path)
            handle = tar.extractfile(target) if target is not None else None
            if target is None or handle is None:
                continue
            writer.add_stream(f"{into}/{path}", handle, target.size)
            count += 1
    return count


def _resolved(members: dict[str, tarfile.TarInfo], path: str) -> tarfile.TarInfo | None:
    """The regular file `path` is, through at most 8 links, within the layer's own members."""
    for _ in range(8):
        member = members.get(path)
        if member is None or member.isreg():
            return member
        if member.islnk():
            path = clean_name(member.linkname)
        elif member.issym():
            base = path.rsplit("/", 1)[0] if "/" in path else ""
            joined = member.linkname if member.linkname.startswith("/") else f"{base}/{member.linkname}"
            parts: list[str] = []
            for part in joined.split("/"):
                if part == "..":
                    if parts:
                        parts.pop()
                elif part not in ("", "."):
                    parts.append(part)
            path = "/".join(parts)
        else:
            return None
    return None


def _receive(stream: IO[bytes], scratch: Path) -> None:
    """The bytecode the container left, unpacked under `scratch/out`: plain files only, each under
    out/NNNN/, named as Python names a `.pyc`, no larger than PYC_LIMIT."""
    total = 0
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            total += member.size
            if total > TOTAL_LIMIT:
                raise BuildFailed(f"the bytecode compiler left more than {TOTAL_LIMIT >> 30} GiB: not bytecode of "
                                  "its sources")
            path = safe_path(member.name)
            if member.isdir():
                continue
            parts = (path or "").split("/")
            if (path is None or not member.isreg() or len(parts) < 4 or parts[0] != "out"
                    or not parts[1].isdigit() or parts[-2] != "__pycache__" or not parts[-1].endswith(".pyc")
                    or member.size > PYC_LIMIT):
                raise BuildFailed(f"the bytecode compiler left an entry that is not a .pyc of its sources: "
                                  f"{member.name[:200]!r}")
            target = scratch / path
            target.parent.mkdir(parents=True, exist_ok=True)
            handle = tar.extractfile(member)
            assert handle is not None
            with open(target, "wb") as out:
                shutil.copyfileobj(handle, out, 1 << 20)


def _layer_of(store: Store, folder: Path, mtime: int, what: str) -> tuple[str, int] | None:
    """One layer of the `.pyc` files under `folder` (a copy of the image's tree), sorted; its
    `__pycache__` folders are its own entries."""
    from enginebuild.io.store import HashingWriter, make_blob
    from enginebuild.io.tars import TarWriter

    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.pyc") if p.is_file())
    if not files:
        return None

    def body(sink: HashingWriter) -> None:
        writer = TarWriter(sink, mtime=mtime)
        for path in files:
            writer.add_dir(path.rsplit("/", 1)[0])
            writer.add_file(path, folder / path)
        writer.close()

    blob = make_blob(store, what, body)
    return blob.sha256, blob.size


@dataclass(frozen=True)
class Report:
    """One line the compiler printed: a folder compiled, or why it stopped."""

    folder: str = ""
    compiled: int = 0
    failed: int = 0
    first_failed: tuple[str, ...] = ()
    error: str = ""


def _lines(out: bytes) -> list[Report]:
    from enginebuild.wire import loads

    found = []
    for line in out.decode("utf-8", "replace").splitlines()[:100_000]:
        try:
            value = loads(line)
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        try:
            found.append(Report(str(value.get("folder", ""))[:16], int(value.get("compiled", 0)),
                                int(value.get("failed", 0)),
                                tuple(str(p)[:300] for p in list(value.get("first_failed") or ())[:3]),
                                str(value.get("error", ""))[:300]))
        except (TypeError, ValueError):
            continue
    return found


def _reports(out: bytes) -> dict[str, Report]:
    return {r.folder: r for r in _lines(out) if r.folder}
