"""Which files of a component's source its build installs verbatim, learned from the bytes.

A source file is installed verbatim at an output member when the member's bytes are the file's
and its path is the file's path, or ends with it, or is its end (`vllm/x.py` in the sdist and
in the wheel; `py/launcher.py` at `/opt/py/launcher.py`); among several files with those bytes
the one sharing the longest path suffix is taken, and a tie is no fact. Learned per recipe (the
component's key without patches), from the source tree the build received and the outputs it
made, for the files a patch applied as files changes (and every source file of the same name,
the only ones that can be nearer to a member: the answer is the one a look at every file gives),
and kept in the store (`records/verbatim/<recipe key>`): a path listed with no placement is known
not to be installed verbatim; a path not listed is not known yet. A wheel's members outside its
root (`.data/`, `.dist-info/`) are never verbatim: the installer moves or rewrites them.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild.io.tarrules import clean_name

if TYPE_CHECKING:
    from enginebuild.io.store import Store

KIND = "verbatim"
FORMAT = 2  # 2: a hard link's names are members
_SHA = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Placed:
    """Where the build put a source file's bytes."""

    at: str  # the member's path in the output: in its wheel, or in the outputs tar
    wheel: str  # the wheel holding it ("" for the outputs tar)
    sha256: str
    size: int
    mode: int  # as installed (a wheel's member: 0o755 or 0o644)

    def to_json(self) -> list[object]:
        return [self.at, self.wheel, self.sha256, self.size, self.mode]


# source path -> where its build installs it verbatim (empty: checked, not verbatim; absent: not known)
Facts = Mapping[str, tuple[Placed, ...]]


class OutputMember:
    """One regular file of a component's output (or another name of one), its bytes read on demand."""

    def __init__(self, at: str, wheel: str, size: int, mode: int, read: Callable[[], bytes],
                 info: tarfile.TarInfo | None = None, same_as: str = ""):
        self.at, self.wheel, self.size, self.mode, self.read = at, wheel, size, mode, read
        self.info = info  # an outputs tar's member: its owner and mode, as the layer of outputs writes them
        self.same_as = same_as  # a hard link: the member (earlier in the tar) whose file it is another name of


def read_facts(store: Store, recipe_key: str) -> dict[str, tuple[Placed, ...]] | None:
    """The facts kept for a recipe; a record of another shape is no fact (learned again)."""
    record = store.record(KIND, recipe_key)
    if not record or record.get("format") != FORMAT or not isinstance(record.get("files"), dict):
        return None
    out: dict[str, tuple[Placed, ...]] = {}
    for path, rows in record["files"].items():
        if not isinstance(path, str) or not isinstance(rows, list):
            return None
        placed = []
        for row in rows:
            if not (isinstance(row, list) and len(row) == 5 and all(isinstance(v, str) for v in row[:3])
                    and isinstance(row[3], int) and isinstance(row[4], int) and 0 <= row[4] <= 0o7777
                    and _SHA.fullmatch(row[2])):
                return None
            placed.append(Placed(row[0], row[1], row[2], row[3], row[4]))
        out[path] = tuple(placed)
    return out


def keep_facts(store: Store, recipe_key: str, facts: Facts) -> None:
    store.put_record(KIND, recipe_key, {"format": FORMAT, "files": {
        path: [p.to_json() for p in placed] for path, placed in sorted(facts.items())}})


def forget(store: Store, recipe_key: str, facts: Facts, path: str) -> dict[str, tuple[Placed, ...]]:
    """The facts with `path` known not verbatim (found so when a layer was written), kept so."""
    rest = {**facts, path: ()}
    keep_facts(store, recipe_key, rest)
    return rest


def same_names(listing: Iterable[str], paths: Iterable[str]) -> list[str]:
    """The files of a tree's listing named as one of `paths` is: the only source files that can
    be the nearest to a member that one of `paths` is near."""
    names = {posixpath.basename(p) for p in paths}
    return sorted(p for p in listing if posixpath.basename(p) in names)


def source_files(tree_tar: Path, wanted: Callable[[str], bool]) -> dict[str, tuple[int, str]]:
    """path -> (size, sha256) of each regular file of a normalised tree tar that `wanted` takes."""
    out = {}
    with tarfile.open(tree_tar, "r:") as tar:
        for member in tar:
            name = clean_name(member.name)
            if member.isreg() and wanted(name):
                handle = tar.extractfile(member)
                assert handle is not None
                digest = hashlib.sha256()
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
                out[name] = (member.size, digest.hexdigest())
    return out


def wheel_members(path: Path, filename: str) -> Iterator[OutputMember]:
    """The members of a wheel that the installer copies as they are (its root, not .data/ or
    .dist-info/); each one's bytes are read while the iteration lasts."""
    with zipfile.ZipFile(path) as zipped:
        for info in zipped.infolist():
            name = info.filename
            if name.endswith("/") or "/" in name and name.split("/", 1)[0].endswith((".dist-info", ".data")):
                continue
            yield OutputMember(name, filename, info.file_size, wheel_mode(info),
                               lambda info=info: zipped.read(info))  # type: ignore[misc]


def wheel_mode(info: zipfile.ZipInfo) -> int:
    """The mode the installer gives a wheel's member (executable where the archive says so)."""
    return 0o755 if (info.external_attr >> 16) & 0o111 else 0o644


def tar_members(path: Path) -> Iterator[OutputMember]:
    """The regular files of an outputs tar, each name of a hard-linked file among them (a link
    is the file it names, at its own path: a patch of the file reaches every name); each one's
    bytes are read while the iteration lasts."""
    with tarfile.open(path, "r:") as tar:
        regular: dict[str, tarfile.TarInfo] = {}
        for member in tar:
            target = regular.get(clean_name(member.linkname)) if member.islnk() else member if member.isreg() else None
            if target is None:
                continue
            if member.isreg():
                regular[clean_name(member.name)] = member
            yield OutputMember(clean_name(member.name), "", target.size, target.mode & 0o7777,
                               lambda target=target: _read_member(tar, target), target,  # type: ignore[misc]
                               clean_name(target.name) if member.islnk() else "")


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    assert handle is not None
    return handle.read()


def _suffix(a: str, b: str) -> int:
    """How many trailing path parts two paths share."""
    x, y = a.split("/"), b.split("/")
    n = 0
    while n < min(len(x), len(y)) and x[-1 - n] == y[-1 - n]:
        n += 1
    return n


def learn(sources: Mapping[str, tuple[int, str]], members: Iterable[OutputMember]) -> dict[str, tuple[Placed, ...]]:
    """The facts about `sources` (path -> (size, sha256)): for each output member, the source
    file it is a verbatim copy of, if one; every source path is listed (empty: not verbatim)."""
    by_name: dict[str, list[str]] = {}
    for path in sources:
        by_name.setdefault(posixpath.basename(path), []).append(path)
    found: dict[str, list[Placed]] = {}
    links: list[OutputMember] = []
    for member in members:
        if member.same_as:  # another name of a file: placed where that file is
            links.append(member)
            continue
        near = [s for s in by_name.get(posixpath.basename(member.at), ())
                if sources[s][0] == member.size and (s == member.at or s.endswith("/" + member.at)
                                                     or member.at.endswith("/" + s))]
        if not near:
            continue
        digest = hashlib.sha256(member.read()).hexdigest()
        same = [s for s in near if sources[s][1] == digest]
        if not same:
            continue
        best = max(_suffix(s, member.at) for s in same)
        chosen = [s for s in same if _suffix(s, member.at) == best]
        if len(chosen) != 1:
            continue  # files of the same bytes and the same nearness: no way to tell which it is
        found.setdefault(chosen[0], []).append(Placed(member.at, member.wheel, digest, member.size, member.mode))
    for link in links:
        for placed in found.values():
            first = next((p for p in placed if p.at == link.same_as and p.wheel == link.wheel), None)
            if first is not None:
                placed.append(Placed(link.at, link.wheel, first.sha256, first.size, first.mode))
                break
    return {path: tuple(found.get(path, ())) for path in sorted(sources)}
