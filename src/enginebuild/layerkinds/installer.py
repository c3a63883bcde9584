"""Installing a wheel into a layer on the host, with pypa's `installer`: the files pip would
write (RECORD, INSTALLER, console scripts with the image's interpreter), no bytecode, no pip
and no container. The layer's bytes depend only on the wheel and the install scheme."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import posixpath
import shutil
import tempfile
import threading
import warnings
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from email.parser import HeaderParser
from pathlib import Path
from typing import Any, BinaryIO

from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.records import Hash, RecordEntry
from installer.scripts import Script
from installer.sources import WheelFile
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

from enginebuild.errors import BuildFailed
from enginebuild.io import faults
from enginebuild.io.background import Cancelled, stop_if_cancelled
from enginebuild.io.files import MEMORY_TMP, temp_path
from enginebuild.io.tars import FolderEntry, TarWriter, walk_folder, write_folder
from enginebuild.io.unpack import Budget


class MemoryStage:
    """Where a wheel is unpacked on its way into a layer: a memory-backed folder (/dev/shm) while
    what is unpacked there at once stays within a quarter of its free space and 4 GiB, else the
    temporary folder on disk. Staged files are written, read once into the layer and removed:
    in memory they cost no disk writes (torch's 1.1 GB unpacks in half the time)."""

    LIMIT = 4 << 30

    def __init__(self, folder: Path):
        self.folder, self.lock, self.used = folder, threading.Lock(), 0

    def take(self, size: int) -> bool:
        with self.lock:
            try:
                free = shutil.disk_usage(self.folder).free if os.access(self.folder, os.W_OK) else 0
            except OSError:
                free = 0
            if self.used + size > min(self.LIMIT, free // 4):
                return False
            self.used += size
            return True

    def give(self, size: int) -> None:
        with self.lock:
            self.used -= size


MEMORY = MemoryStage(MEMORY_TMP)


def scheme(site_packages: str) -> dict[str, str]:
    """The install scheme for a site-packages folder (/usr/local/lib/python3.12/dist-packages)."""
    prefix = site_packages.split("/lib/", 1)[0] if "/lib/" in site_packages else "/usr/local"
    version = next((p for p in site_packages.split("/") if p.startswith("python3")), "python3")
    return {"purelib": site_packages, "platlib": site_packages, "scripts": f"{prefix}/bin",
            "data": prefix, "headers": f"{prefix}/include/{version}"}


@contextmanager
def staged(wheel: Path, filename: str, site_packages: str, interpreter: str,
           editable: str = "") -> Iterator[list[FolderEntry]]:
    """The files pip would write for the wheel stored at `wheel` (named `filename`, which the
    installer reads tags from), installed into a folder that lives as long as the context; for
    an editable wheel of the tree at `editable`, its direct_url.json saying so."""
    with zipfile.ZipFile(wheel) as zipped:  # what its members declare, before anything is written
        unpacked = sum(i.file_size for i in zipped.infolist())
        Budget(filename, wheel.stat().st_size).take(unpacked)
    in_memory = MEMORY.take(unpacked)
    stage = temp_path(MEMORY.folder if in_memory else Path(tempfile.gettempdir()), "enginebuild-wheel", "d")
    named = temp_path(stage.parent, "enginebuild-wheel-name", "d") / filename
    try:  # from here on the folders and the memory taken are given back, whatever happens
        stage.mkdir()
        named.parent.mkdir()
        named.symlink_to(wheel)
        paths = {k: str(stage / v.lstrip("/")) for k, v in scheme(site_packages).items()}
        destination = _Stoppable(paths, interpreter=interpreter, script_kind="posix", bytecode_optimization_levels=())
        try:
            with WheelFile.open(named) as source, warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # "Skip installing ...__pycache__": as pip does
                install(source, destination, additional_metadata=_metadata(editable))
        except Cancelled:
            raise
        except Exception as exc:  # installer raises plain exceptions for bad wheels
            raise BuildFailed(f"cannot install {filename}: {exc}") from None
        yield list(walk_folder(stage))
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(named.parent, ignore_errors=True)
        if in_memory:
            MEMORY.give(unpacked)


class _Stoppable(SchemeDictionaryDestination):
    """Unpacks as installer does, and stops before the next file once the run is cancelled (the
    stage is then removed by `staged` before the process leaves)."""

    def write_file(self, scheme: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
        stop_if_cancelled()
        faults.reached("installer.file", str(path))
        return super().write_file(scheme, path, *args, **kwargs)


def _metadata(editable: str) -> dict[str, bytes]:
    extra = {"INSTALLER": b"enginebuild\n"}
    if editable:  # PEP 610: how pip (`pip list -e`) knows an editable install and its tree
        extra["direct_url.json"] = json.dumps({"dir_info": {"editable": True}, "url": f"file://{editable}"},
                                              sort_keys=True).encode()
    return extra


class _RecordOnly(SchemeDictionaryDestination):
    """Installs nothing: replays what installing a wheel would write into its RECORD. A member of
    the wheel's root is hashed as its own RECORD says (read from the archive where it says
    nothing usable), a replaced member as its new bytes; scripts and metadata are hashed as
    written."""

    def __init__(self, paths: dict[str, str], interpreter: str, known: dict[str, tuple[str, int]],
                 replaced: Mapping[str, bytes]):
        super().__init__(paths, interpreter=interpreter, script_kind="posix", bytecode_optimization_levels=())
        self.known, self.replaced, self.record = known, replaced, b""

    def write_to_fs(self, scheme: Any, path: str, stream: BinaryIO, is_executable: bool) -> RecordEntry:
        if path.endswith(".dist-info/RECORD") and path.count("/") == 1:
            self.record = stream.read()
            return RecordEntry(path, None, None)
        root = scheme in ("purelib", "platlib")
        if root and path in self.replaced:
            data = self.replaced[path]
            return RecordEntry(path, Hash("sha256", _b64_sha256(data)), len(data))
        if root and path in self.known:
            value, size = self.known[path]
            return RecordEntry(path, Hash("sha256", value), size)
        digest, size = hashlib.sha256(), 0
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
        return RecordEntry(path, Hash("sha256", base64.urlsafe_b64encode(digest.digest()).decode().rstrip("=")), size)

    def write_script(self, name: str, module: str, attr: str, section: Any) -> RecordEntry:
        script_name, data = Script(name, module, attr, section).generate(self.interpreter, self.script_kind)
        return self.write_to_fs("scripts", script_name, io.BytesIO(data), True)


@contextmanager
def _named(wheel: Path, filename: str) -> Iterator[Path]:
    """The stored wheel under its own file name (the installer reads its tags from the name)."""
    named = temp_path(Path(tempfile.gettempdir()), "enginebuild-wheel-name", "d") / filename
    try:
        named.parent.mkdir()
        named.symlink_to(wheel)
        yield named
    finally:
        shutil.rmtree(named.parent, ignore_errors=True)


def _b64_sha256(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")


def installed_record(wheel: Path, filename: str, site_packages: str, interpreter: str,
                     replaced: Mapping[str, bytes]) -> tuple[str, bytes]:
    """(its path in the image, no leading /; its bytes): the RECORD that installing the wheel
    with the members of `replaced` holding those bytes would write, the wheel not unpacked."""
    paths = scheme(site_packages)
    with _named(wheel, filename) as named, WheelFile.open(named) as source:
        known: dict[str, tuple[str, int]] = {}
        for row in csv.reader(io.StringIO(source.read_dist_info("RECORD"))):
            if len(row) == 3 and row[1].startswith("sha256=") and row[2].isdigit():
                known[row[0]] = (row[1][len("sha256="):], int(row[2]))
        destination = _RecordOnly(paths, interpreter, known, replaced)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                install(source, destination, additional_metadata=_metadata(""))
        except Exception as exc:  # installer raises plain exceptions for bad wheels
            raise BuildFailed(f"cannot read {filename} as a wheel: {exc}") from None
        folder = source.dist_info_dir
    return f"{site_packages.strip('/')}/{folder}/RECORD", destination.record


def install_wheel(wheel: Path, filename: str, site_packages: str, interpreter: str, writer: TarWriter,
                  editable: str = "") -> set[str]:
    """Install one wheel into the layer; returns the paths it wrote (no leading /)."""
    with staged(wheel, filename, site_packages, interpreter, editable) as entries:
        write_folder(writer, Path("/"), entries=entries)
        return {e.rel for e in entries}


def install_wheels(wheels: list[tuple[Path, str]], site_packages: str, interpreter: str, writer: TarWriter) -> set[str]:
    """Install wheels into one layer in order, each path written once: a file that a later wheel
    installs too is written from the later one, as installing them one after the other leaves it."""
    with ExitStack() as stack:
        staged_entries = [stack.enter_context(staged(w, f, site_packages, interpreter)) for w, f in wheels]
        later: set[str] = set()
        kept: list[list[FolderEntry]] = []
        for entries in reversed(staged_entries):
            kept.append([e for e in entries if e.kind == "dir" or e.rel not in later])
            later |= {e.rel for e in entries if e.kind != "dir"}
        for entries in reversed(kept):
            write_folder(writer, Path("/"), entries=entries)
        return {e.rel for entries in staged_entries for e in entries}


def record_paths(record: bytes, folder: str) -> set[str]:
    """The paths (no leading /) a distribution's RECORD lists, its .dist-info folder being `folder`."""
    parent = posixpath.dirname(folder.strip("/"))
    out = set()
    for row in csv.reader(io.StringIO(record.decode("utf-8", "replace"))):
        if row and row[0]:
            path = posixpath.normpath(posixpath.join(parent, row[0]))
            if not path.startswith("../"):
                out.add(path)
    return out


def removals(old: set[str], folder: str, site_packages: str, written: set[str]) -> list[str]:
    """What a layer must delete (as whiteouts) so that only the new version of a distribution is
    left, as `pip uninstall` would leave it: its .dist-info folder, each top-level folder of
    site-packages that only the old version had, and every other old file the new one does not
    write again."""
    site = site_packages.strip("/")
    kept_dirs = {posixpath.dirname(p) for p in written}
    kept_dirs |= {d for p in kept_dirs for d in _parents(p)}
    out = {folder.strip("/")} if folder.strip("/") not in kept_dirs else set()
    for path in sorted(old - written):
        if path.startswith(folder.strip("/") + "/") and folder.strip("/") in out:
            continue
        top = _top_under(path, site)
        if top and top not in kept_dirs and top not in written:
            out.add(top)
        else:
            out.add(path)
    return sorted(p for p in out if not any(p.startswith(q + "/") for q in out))


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _top_under(path: str, site: str) -> str:
    """`site/pkg` for a path inside a folder `pkg` of site-packages, else ""."""
    if not path.startswith(site + "/"):
        return ""
    rest = path[len(site) + 1:]
    return f"{site}/{rest.split('/', 1)[0]}" if "/" in rest else ""


def whiteout(writer: TarWriter, path: str) -> None:
    """Delete `path` of the layers below (the OCI whiteout: an empty `.wh.NAME` beside it)."""
    folder, _, name = path.rpartition("/")
    writer.add_bytes(f"{folder}/.wh.{name}" if folder else f".wh.{name}", b"")


def unmet_requirements(wheel: Path, closure: tuple[tuple[str, str], ...],
                       target: tuple[tuple[str, str], ...], excluded: tuple[str, ...] = (),
                       provided: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """What the wheel's own metadata (Requires-Dist, markers read for `target`) asks for that
    the locked closure (name, version) does not give: the lock resolved other needs than the
    wheel states. A name the spec `exclude`s is not asked of what the lock resolved for it, but it
    must still be met by the image: the base's distributions and the lock's (in `closure`), or a
    wheel another component builds (`provided`, its version where known)."""

    with zipfile.ZipFile(wheel) as zipped:
        name = next((n for n in zipped.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
        if name is None:
            return [f"{wheel.name} has no .dist-info/METADATA"]
        metadata = HeaderParser().parsestr(zipped.read(name).decode("utf-8", "replace"))
    have = {canonicalize_name(n): v for n, v in closure}
    environment = {**dict(target), "extra": ""}
    problems = []
    for text in metadata.get_all("Requires-Dist") or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            problems.append(f"{text!r} (not a requirement)")
            continue
        if req.marker is not None and not req.marker.evaluate(environment):
            continue
        if canonicalize_name(req.name) in excluded:
            found = {**{canonicalize_name(n): v for n, v in provided}, **have}.get(canonicalize_name(req.name))
            if found is None:
                problems.append(f"{text} (excluded from the lock, and nothing in the image provides {req.name}: not "
                                "the base, the lock or another component's wheel)")
            elif found and req.specifier and not _contains(req, found):
                problems.append(f"{text} (excluded from the lock; the image has {req.name} {found})")
            continue
        found = have.get(canonicalize_name(req.name))
        if found is None:
            problems.append(f"{text} (the lock has no {req.name})")
            continue
        if not _contains(req, found):
            problems.append(f"{text} (the lock has {req.name} {found})")
    return problems


def _contains(req: Requirement, version: str) -> bool:
    try:
        return not str(req.specifier) or req.specifier.contains(version, prereleases=True)
    except InvalidVersion:
        return False
