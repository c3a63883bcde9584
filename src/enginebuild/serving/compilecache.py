"""Compile caches that outlive a container: an engine's cache folders (torch.compile's Inductor
and Triton caches, vLLM's `torch_compile_cache`, FlashInfer's JIT) captured after a warm-up as one
content-addressed archive, recorded under what shapes the compiled code, and restored into a
fresh container's folders only where that record matches the node exactly.

Standard library only: the same code runs on the node, inside the image (as serving/nodeside.py
does), whatever Python the image has. The archive is a deterministic tar: its first member is
the record (`RECORD`), then every folder's files in sorted order under `NAME/`, each with mode
0644 or 0755, no owner and time 0, so the same files give the same bytes and the same sha256 (a
second warm-up that compiled nothing new makes nothing new to push). Restoring refuses, naming
the field, a record that differs from the node's in any field; and takes only regular files and
folders under the folder names it was given (no link, no absolute or `..` path, no device), no
larger than the archive says, to a bounded total.

A cache reused under the wrong key gives wrong results or crashes (a key that moves every run
caches nothing; text-only and multimodal runs sharing one AOT cache poisoned each other): the
record holds every fact the compiled code depends on that the engines' own keys may leave out."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import platform
import re
import stat
import subprocess
import sys
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

RECORD = "enginebuild-compile-cache.json"
FORMAT = 1
MAX_TOTAL = 16 << 30  # what one restore writes at most
MAX_FILES = 200_000
# the facts compiled code depends on: a record differing in any of them is never restored
FIELDS = ("gpu", "compute_capability", "driver", "cuda", "torch", "triton", "python", "machine", "arch_list",
          "model", "model_revision", "engine_args")
# the folders engines keep compiled code in, by the variable that names each (its default in the image
# where unset): what `serve warm` captures and `serve up` restores
FOLDERS = {"inductor": "TORCHINDUCTOR_CACHE_DIR", "triton": "TRITON_CACHE_DIR", "vllm": "VLLM_CACHE_ROOT",
           "flashinfer": "FLASHINFER_WORKSPACE_BASE"}


class Refused(Exception):
    """A cache that must not be restored here; the message names why (a field, a member)."""


@dataclass(frozen=True)
class Captured:
    sha256: str
    size: int
    files: int
    record: dict[str, str]


def record_of(facts: Mapping[str, object]) -> dict[str, str]:
    """The record of a cache made where `facts` hold: every field, as text ("" where unknown)."""
    return {name: str(facts.get(name, "") or "") for name in FIELDS}


def differences(wanted: Mapping[str, str], found: Mapping[str, object]) -> list[str]:
    """The fields in which a cache's record `found` differs from this node's `wanted`, as
    `field: cache X, here Y`."""
    out = []
    for name in FIELDS:
        theirs = str(found.get(name, "")) if isinstance(found, Mapping) else ""
        if theirs != wanted.get(name, ""):
            out.append(f"{name}: the cache's {theirs or '(none)'!r}, here {wanted.get(name) or '(none)'!r}")
    return out


def _files(folders: Mapping[str, Path]) -> Iterator[tuple[str, Path, int]]:
    """(name in the archive, path, mode) of every regular file and folder, in sorted order; links
    and anything else are left out (a cache's files are plain files)."""
    for label in sorted(folders):
        root = Path(folders[label])
        if not root.is_dir():
            continue
        yield label, root, 0o755
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = Path(dirpath).relative_to(root)
            for name in sorted(dirnames + filenames):
                path = Path(dirpath) / name
                st = os.lstat(path)
                arcname = (Path(label) / rel / name).as_posix()
                if stat.S_ISDIR(st.st_mode):
                    yield arcname, path, 0o755
                elif stat.S_ISREG(st.st_mode):
                    yield arcname, path, 0o755 if st.st_mode & 0o111 else 0o644


def _info(name: str, kind: bytes, size: int, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.mode, info.mtime = kind, size, mode, 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def capture(folders: Mapping[str, Path], record: Mapping[str, str], out: Path) -> Captured:
    """The folders (by name) and the record as one deterministic tar.gz at `out`."""
    body = json.dumps({"format": FORMAT, **record_of(record)}, sort_keys=True, indent=1).encode()
    count = 0
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped, \
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(_info(RECORD, tarfile.REGTYPE, len(body), 0o644), io.BytesIO(body))
        for arcname, path, mode in _files(folders):
            if path.is_dir():
                tar.addfile(_info(arcname, tarfile.DIRTYPE, 0, mode))
                continue
            with open(path, "rb") as handle:
                tar.addfile(_info(arcname, tarfile.REGTYPE, os.fstat(handle.fileno()).st_size, mode), handle)
            count += 1
    digest = hashlib.sha256()
    with open(out, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return Captured(digest.hexdigest(), out.stat().st_size, count, record_of(record))


def read_record(archive: Path) -> dict[str, str]:
    """The record an archive carries (its first member); Refused when it carries none."""
    with tarfile.open(archive, "r:gz") as tar:
        first = tar.next()
        if first is None or first.name != RECORD or not first.isreg() or first.size > 1 << 16:
            raise Refused(f"{archive.name}: not a compile cache (its first member is not {RECORD})")
        handle = tar.extractfile(first)
        assert handle is not None
        try:
            doc = json.loads(handle.read())
        except ValueError:
            raise Refused(f"{archive.name}: its record is not JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise Refused(f"{archive.name}: a record of another format ({doc.get('format') if isinstance(doc, dict) else '?'})")
    return {name: str(doc.get(name, "")) for name in FIELDS}


def restore(archive: Path, folders: Mapping[str, Path], here: Mapping[str, str]) -> int:
    """The archive's files into `folders` (by name), once its record is this node's (`here`) in
    every field; returns how many files. Refused, naming the field or the member, otherwise:
    nothing is written before the record is checked, and a bad member stops the restore."""
    found = read_record(archive)
    wrong = differences(record_of(here), found)
    if wrong:
        raise Refused(f"{archive.name} was compiled under another key: " + "; ".join(wrong))
    written, total = 0, 0
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if member.name == RECORD:
                continue
            parts = member.name.split("/")
            if member.name.startswith("/") or ".." in parts or parts[0] not in folders or not all(parts):
                raise Refused(f"{archive.name}: member {member.name[:200]!r} is outside the cache's folders")
            target = Path(folders[parts[0]]).joinpath(*parts[1:])
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            if not member.isreg():
                raise Refused(f"{archive.name}: member {member.name[:200]!r} is not a file or a folder")
            total += member.size
            written += 1
            if total > MAX_TOTAL or written > MAX_FILES:
                raise Refused(f"{archive.name}: more than {MAX_TOTAL >> 30} GiB or {MAX_FILES} files")
            target.parent.mkdir(parents=True, exist_ok=True)
            _no_link_under(Path(folders[parts[0]]), target, archive.name)
            handle = tar.extractfile(member)
            assert handle is not None
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "wb") as out:
                left = member.size
                while left:
                    chunk = handle.read(min(left, 1 << 20))
                    if not chunk:
                        raise Refused(f"{archive.name}: member {member.name[:200]!r} is cut short")
                    out.write(chunk)
                    left -= len(chunk)
            os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)
    return written


def _no_link_under(root: Path, target: Path, what: str) -> None:
    """Nothing between the folder and the file is a link (one planted in the node's folder would
    lead the write elsewhere)."""
    path = target
    while path != root and root in path.parents:
        if path.is_symlink():
            raise Refused(f"{what}: {path} is a link in the cache's folder; nothing is written through it")
        path = path.parent


# -- on the node, in a container of the image ---------------------------------------------------
def _version(*names: str) -> str:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return ""


def _gpu() -> tuple[str, str, str]:
    """(name, compute capability, driver) of the first GPU nvidia-smi sees; empty without one."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return "", "", ""
    first = (done.stdout.strip().splitlines() or [""])[0] if done.returncode == 0 else ""
    parts = [p.strip() for p in first.split(",")]
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else ("", "", "")


def model_revision(model: str) -> str:
    """A hub snapshot's 40-hex revision where the path names one, else a digest of the folder's
    listing (every file's path and size): what the compiled code was made for."""
    found = re.search(r"/snapshots/([0-9a-f]{40})(/|$)", model)
    if found:
        return found.group(1)
    root = Path(model)
    if not root.exists():
        return ""
    digest = hashlib.sha256()
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for path in paths:
        digest.update(f"{path.relative_to(root) if path != root else path.name}\t{path.stat().st_size}\n".encode())
    return "files:" + digest.hexdigest()[:24]


def node_record(model: str, engine_args: str) -> dict[str, str]:
    """This node's record: its GPU, the image's CUDA, torch, Triton and Python, the machine, the arch
    list FlashInfer and torch compile for, the model and its revision, the engine's arguments."""
    gpu, capability, driver = _gpu()
    return record_of({
        "gpu": gpu, "compute_capability": capability, "driver": driver,
        "cuda": _version("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime")
        or os.environ.get("CUDA_VERSION", ""),
        "torch": _version("torch"), "triton": _version("triton"), "python": platform.python_version(),
        "machine": platform.machine(),
        "arch_list": os.environ.get("FLASHINFER_CUDA_ARCH_LIST") or os.environ.get("TORCH_CUDA_ARCH_LIST", ""),
        "model": Path(model).name if model else "", "model_revision": model_revision(model) if model else "",
        "engine_args": engine_args})


def main(argv: list[str]) -> int:
    """record MODEL ARGS | capture FOLDERS MODEL ARGS OUT | restore ARCHIVE FOLDERS MODEL ARGS: one JSON line."""
    try:
        if argv[:1] == ["record"] and len(argv) == 3:
            print(json.dumps({"record": node_record(argv[1], argv[2])}))
        elif argv[:1] == ["capture"] and len(argv) == 5:
            folders = {k: Path(v) for k, v in json.loads(argv[1]).items()}
            done = capture(folders, node_record(argv[2], argv[3]), Path(argv[4]))
            print(json.dumps({"sha256": done.sha256, "size": done.size, "files": done.files, "record": done.record}))
        elif argv[:1] == ["restore"] and len(argv) == 5:
            folders = {k: Path(v) for k, v in json.loads(argv[2]).items()}
            print(json.dumps({"restored": restore(Path(argv[1]), folders, node_record(argv[3], argv[4]))}))
        else:
            print(json.dumps({"refused": "usage: record | capture | restore"}))
            return 2
    except Refused as exc:
        print(json.dumps({"refused": str(exc)}))
        return 3
    except (OSError, tarfile.TarError, ValueError, EOFError) as exc:
        print(json.dumps({"refused": f"{type(exc).__name__}: {exc}"}))
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
