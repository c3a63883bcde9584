"""An image's file table, as its dynamic loader would find it: every path of the stacked layers
(whiteouts applied), symbolic links with their targets, and the linkage of each executable and
shared library (dynamic.py). Each layer is read once and its table kept in the store by its
diff ID (the sha256 of its uncompressed bytes), so a base's or a wheel's layer is read once
for every image that has it.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, cast

from enginebuild.io.store import HashingReader
from enginebuild.kernels.dynamic import Linkage, read_linkage
from enginebuild.kernels.elf import is_elf
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    from enginebuild.io.store import Store

TABLE_RECORD = "file-table-v3"  # v3: a damaged dynamic segment is recorded
KEPT_TEXT = ("/etc/ld.so.conf", "/etc/ld.so.conf.d/*")  # read by the loader model: their text is kept
_MAX_HOPS = 40


@dataclass(frozen=True)
class Entry:
    kind: str  # f: file, l: symbolic link, d: folder
    layer: str = ""  # the layer it comes from (its name in the plan, or "base")
    target: str = ""  # a link's target
    linkage: Linkage | None = None
    text: str = ""  # ld.so.conf files
    at: tuple[str, int, int] | None = None  # (stored layer sha256, offset, size): its bytes, for a later read


def index_layer(tar: tarfile.TarFile, streamed: bool = False) -> JsonDoc:
    """The table of one layer: its entries, and the paths its whiteouts remove below it.
    `streamed`: the tar is read as a stream (no seeking back in a member)."""
    entries: list[list[object]] = []
    gone: list[str] = []
    opaque: list[str] = []
    seen: dict[str, list[object]] = {}
    for member in tar:
        path = _path(member.name)
        folder, base = os.path.split(path)
        if base == ".wh..wh..opq":
            opaque.append(folder)
            continue
        if base.startswith(".wh."):
            gone.append(os.path.join(folder, base[4:]))
            continue
        if member.issym():
            row: list[object] = [path, "l", member.linkname, None, "", 0, 0]
        elif member.isdir():
            row = [path, "d", "", None, "", 0, 0]
        elif member.islnk():
            linked = seen.get(_path(member.linkname))
            row = [path, *(linked[1:] if linked else ["f", "", None, "", 0, 0])]
        elif member.isfile():
            row = [path, "f", "", None, "", 0, 0]
            handle = tar.extractfile(member)
            assert handle is not None
            if any(fnmatch.fnmatch(path, p) for p in KEPT_TEXT) and member.size < 1 << 16:
                row[4] = handle.read().decode("utf-8", "replace")
            elif path.endswith(".py"):  # Python code: what it loads by name is looked for in it
                row[5], row[6] = member.offset_data, member.size
            elif member.size >= 52:
                linkage = _linkage(handle, streamed)
                if linkage is not None:
                    row[3], row[5], row[6] = linkage.to_json(), member.offset_data, member.size
        else:
            continue
        seen[path] = row
        entries.append(row)
    return {"entries": entries, "gone": gone, "opaque": opaque}


def _path(name: str) -> str:
    return "/" + (name[2:] if name.startswith("./") else name).strip("/")


def _linkage(handle: IO[bytes], streamed: bool) -> Linkage | None:
    head = handle.read(4)
    if not is_elf(head):
        return None
    if not streamed:
        return read_linkage(handle)
    with tempfile.SpooledTemporaryFile(max_size=64 << 20) as spooled:  # a streamed layer: kept to seek in
        spooled.write(head)
        shutil.copyfileobj(handle, spooled, 1 << 20)
        return read_linkage(spooled)


def stored_layer(store: Store, sha: str) -> JsonDoc:
    """The table of a layer in the store (uncompressed, by its sha256), read once."""
    kept = store.record(TABLE_RECORD, sha)
    if kept is None:
        with tarfile.open(store.path(sha), "r:") as tar:
            kept = index_layer(tar)
        store.put_record(TABLE_RECORD, sha, kept)
    return kept


def saved_layers(store: Store, stream: IO[bytes]) -> dict[str, JsonDoc]:
    """The tables of the layers of a `docker save` stream, by diff ID, each kept in the store."""
    out: dict[str, JsonDoc] = {}
    with tarfile.open(fileobj=stream, mode="r|") as outer:
        for member in outer:
            if not (member.isreg() and (member.name.endswith("/layer.tar") or member.name.startswith("blobs/"))):
                continue
            handle = outer.extractfile(member)
            assert handle is not None
            hashed = HashingReader(handle)
            try:
                with tarfile.open(fileobj=cast(IO[bytes], hashed), mode="r|") as inner:
                    table = index_layer(inner, streamed=True)
            except tarfile.TarError:  # a config or manifest among the blobs
                continue
            hashed.drain()
            diff_id = hashed.digest.hexdigest()
            store.put_record(TABLE_RECORD, diff_id, table)
            out[diff_id] = table
    return out


class FileTable:
    """The stacked layers' paths: later layers win; a whiteout removes what is below it."""

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}

    def add(self, layer: str, table: JsonDoc, sha: str | None = None) -> None:
        for folder in table["opaque"]:
            self._remove(folder, keep_self=True)
        for path in table["gone"]:
            self._remove(path)
        for path, kind, target, linkage, text, offset, size in table["entries"]:
            self.entries[path] = Entry(kind, layer, target, Linkage.from_json(linkage) if linkage else None, text,
                                       (sha, offset, size) if sha and size else None)

    def _remove(self, path: str, keep_self: bool = False) -> None:
        below = path.rstrip("/") + "/"
        for key in [k for k in self.entries if k.startswith(below) or (k == path and not keep_self)]:
            del self.entries[key]

    def real(self, path: str) -> str | None:
        """The path with every symbolic link on the way resolved inside the image; None for a loop."""
        parts = [p for p in path.split("/") if p]
        current, hops = "", 0
        while parts:
            part = parts.pop(0)
            if part == ".":
                continue
            if part == "..":
                current = current.rsplit("/", 1)[0]
                continue
            step = f"{current}/{part}"
            entry = self.entries.get(step)
            if entry is not None and entry.kind == "l":
                hops += 1
                if hops > _MAX_HOPS:
                    return None
                parts = [p for p in entry.target.split("/") if p] + parts
                if entry.target.startswith("/"):
                    current = ""
                continue
            current = step
        return current or "/"

    def file(self, path: str) -> tuple[str, Entry] | None:
        """The file a path leads to (links followed), with its real path."""
        real = self.real(path)
        entry = self.entries.get(real) if real else None
        return (real, entry) if real and entry is not None and entry.kind == "f" else None

    def matching(self, pattern: str) -> Iterator[tuple[str, Entry]]:
        return ((p, e) for p, e in self.entries.items() if fnmatch.fnmatch(p, pattern))

    def linked(self) -> Iterable[tuple[str, Entry]]:
        return ((p, e) for p, e in self.entries.items() if e.linkage is not None)
