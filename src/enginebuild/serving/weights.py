"""The model's weights on every node, checked against the deployment lock and moved once.

Each node hashes its copy in a container of the served image (serving/weightfiles.py: every byte,
every start). The first node whose copy is the lock's is the source; a node whose copy lacks a
file or holds other bytes receives only those files, read from the source node's engine and
written through the receiving node's (`GET`/`PUT /containers/ID/archive` of containers that are
created, never started, with the folder mounted), then hashed again. A shared folder (NFS) is the
lock's on every node and moves nothing. A file the lock does not list is named, never removed.
"""

from __future__ import annotations

import contextlib
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from enginebuild.errors import EngineBuildError, shown_line
from enginebuild.serving import driver
from enginebuild.serving.deployment import ModelPin, file_differences
from enginebuild.serving.driver import Reached, ServeFailed
from enginebuild.wire import loads

PROGRAM = (Path(__file__).with_name("weightfiles.py")).read_text
HASH_LIMIT_S = 4 * 3600  # hashing a few hundred GB on a slow disk
_SHA = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Checked:
    node: str
    files: int
    moved: int  # files received
    sent: int  # bytes received
    replaced: tuple[str, ...] = ()  # what differed from the lock before they were received


def listing(each: Reached, image: str, cluster: str, folder: str) -> dict[str, tuple[int, str]] | None:
    """path: (size, sha256) of every file of the node's copy; None where the node has no such folder."""
    inside = f"/models/{PurePosixPath(folder).name}"
    try:
        said = driver.helper(each, image, ["-c", PROGRAM(), "hash", inside], False, [f"{folder}:{inside}:ro"], (),
                             cluster, HASH_LIMIT_S)
    except ServeFailed as failed:
        if any("does not exist" in line or "no such file" in line.lower() for line in failed.lines):
            return None
        raise
    for line in reversed(said.splitlines()):
        if line.startswith("{"):
            try:
                return _checked(each.node.name, loads(line))
            except (ValueError, TypeError) as exc:  # what a container of the image printed: hostile
                raise ServeFailed([f"{each.node.name}: what the image said of the model's files is not a listing: "
                                   f"{shown_line(str(exc))}"]) from None
    raise ServeFailed([f"{each.node.name}: the image's python3 could not hash the model's files: "
                       f"{shown_line(said.strip()[-400:]) or 'no output'}"])


def _checked(node: str, doc: object) -> dict[str, tuple[int, str]]:
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict) or not isinstance(doc.get("errors"), list):
        raise ValueError("expected {files, errors}")
    if doc["errors"]:
        raise ServeFailed([f"{node}: model file {shown_line(str(e))}" for e in doc["errors"][:20]])
    out = {}
    for path, row in doc["files"].items():
        parts = PurePosixPath(path).parts if isinstance(path, str) else ()
        if not parts or path.startswith("/") or any(p in (".", "..") for p in parts) or "\x00" in path:
            raise ValueError(f"{shown_line(str(path))}: not a path inside the folder")
        if not (isinstance(row, list) and len(row) == 2 and isinstance(row[0], int) and row[0] >= 0
                and isinstance(row[1], str) and _SHA.fullmatch(row[1])):
            raise ValueError(f"{shown_line(path)}: not [size, sha256]")
        out[path] = (row[0], row[1])
    return out


def check(reached: list[Reached], image: str, cluster: str, model: ModelPin, move: bool) -> list[Checked]:
    """Every node's copy made the lock's (with `move`) and hashed; a node that differs is refused,
    naming its files."""
    found = {each.node.name: listing(each, image, cluster, model.path) for each in reached}
    source = next((each for each in reached if found[each.node.name] == model.files), None)
    problems, done = [], []
    for each in reached:
        have = found[each.node.name]
        lines = file_differences(model.files, have or {}) if have is not None else [f"{model.path}: no such folder"]
        if not lines:
            done.append(Checked(each.node.name, len(model.files), 0, 0))
            continue
        wanted = [p for p in model.files if have is None or have.get(p) != model.files[p]]
        extra = [p for p in (have or {}) if p not in model.files]
        if not move or source is None or extra:
            why = "" if move and source is not None else \
                (" (--move-weights copies the lock's files from a node that holds them)" if source is not None
                 else " (no node holds the lock's files)")
            problems += [f"{each.node.name}: model {line}{why if i == 0 else ''}" for i, line in enumerate(lines[:20])]
            continue
        sent = send(source, each, image, cluster, model.path, wanted)
        again = listing(each, image, cluster, model.path) or {}
        left = file_differences(model.files, again)
        if left:
            problems += [f"{each.node.name}: model {line} after it was sent" for line in left[:20]]
            continue
        done.append(Checked(each.node.name, len(model.files), len(wanted), sent, tuple(lines)))
    if problems:
        raise ServeFailed(problems)
    return done


def send(source: Reached, target: Reached, image: str, cluster: str, folder: str, paths: list[str]) -> int:
    """The files `paths` of the source node's folder written into the target node's (made where
    absent, in its parent folder); the bytes sent."""
    name = PurePosixPath(folder).name
    parent = str(PurePosixPath(folder).parent)
    with _holder(source, image, cluster, [f"{folder}:/w:ro"]) as reader, \
            _holder(target, image, cluster, [f"{parent}:/p"]) as writer:
        sent = 0
        for path in sorted(paths):
            with source.engine.archive(reader, f"/w/{path}") as stream:
                if stream is None:
                    raise ServeFailed([f"{source.node.name}: model file {path} vanished while it was sent"])
                moved = _Counted()
                try:
                    with target.engine.open("PUT", f"/containers/{writer}/archive", {"path": "/p"},
                                            body=_renamed(stream, f"{name}/{path}", moved), timeout=24 * 3600,
                                            headers={"Content-Type": "application/x-tar",
                                                     "Transfer-Encoding": "chunked"}) as response:
                        response.read()
                        if response.status == 404:
                            raise ServeFailed([f"{target.node.name}: {parent}: no such folder to receive the model"])
                except EngineBuildError as exc:
                    raise ServeFailed([f"{target.node.name}: receiving model file {path}: {exc.message}"]) from None
                sent += moved.bytes
        return sent


class _Counted:
    bytes = 0


def _renamed(stream: IO[bytes], name: str, counted: _Counted) -> Iterator[bytes]:
    """The one regular file of an engine's archive stream, as a tar stream of it named `name`."""
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        member = next(iter(tar), None)
        source = tar.extractfile(member) if member is not None and member.isreg() else None
        if member is None or source is None:
            raise ServeFailed([f"model file {name}: not a regular file on the source node"])
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime, info.uid, info.gid = member.size, 0o644, member.mtime, 0, 0
        yield info.tobuf(tarfile.PAX_FORMAT)
        left = member.size
        while left > 0:
            chunk = source.read(min(_CHUNK, left))
            if not chunk:
                raise ServeFailed([f"model file {name}: the source node's stream ended early"])
            left -= len(chunk)
            counted.bytes += len(chunk)
            yield chunk
        yield b"\0" * ((-member.size) % tarfile.BLOCKSIZE) + b"\0" * (2 * tarfile.BLOCKSIZE)


@contextlib.contextmanager
def _holder(each: Reached, image: str, cluster: str, binds: list[str]) -> Iterator[str]:
    """A container of the image with `binds`, created and never started (its archive is the folder's)."""
    ident = driver.create(each.engine, {"Image": image, "Entrypoint": ["true"], "Labels": {driver.LABEL: cluster},
                                        "NetworkDisabled": True,
                                        "HostConfig": {"NetworkMode": "none", "Mounts": driver.bind_mounts(binds)}})
    try:
        yield ident
    finally:
        driver.remove(each.engine, ident)
