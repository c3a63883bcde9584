"""The layer of a `files:` group: a deterministic tar of its entries, sorted by destination.
One writer for the full build (execution/layers.py) and the file-edit path (fastedit.py), so the
two give the same bytes. Light on imports: the file-edit path runs before the CLI loads."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from enginebuild.io.store import HashingWriter

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple, cast

from enginebuild.errors import BuildFailed
from enginebuild.io.recipefiles import open_recipe_file
from enginebuild.io.store import Blob, HashingReader, Store, make_blob
from enginebuild.io.tars import TarWriter


class FileItem(NamedTuple):
    dest: str
    mode: int
    source: bytes | Path  # the bytes, or the file to read
    sha256: str | None  # what the layer's key holds for a file read here (None: verified already)
    display: str


def _add_planned(writer: TarWriter, item: FileItem) -> None:
    """Bytes that differ from the planned ones (an edit while the build ran) fail the layer
    rather than make its key lie about its content."""
    changed = BuildFailed(f"{item.display} changed while the build ran",
                          hint="run the build again: it builds what is there now")
    path = cast(Path, item.source)
    with open_recipe_file(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        reader = HashingReader(handle)
        try:
            writer.add_stream(item.dest, cast(Any, reader), size, item.mode)
        except OSError:
            if os.stat(path).st_size == size:
                raise  # not the file's doing (the store's disk, say)
            raise changed from None  # shorter than when it was measured
    if reader.digest.hexdigest() != item.sha256:
        raise changed


def write_files(writer: TarWriter, items: Iterable[FileItem]) -> None:
    for item in sorted(items, key=lambda i: i.dest):
        if isinstance(item.source, bytes):
            writer.add_bytes(item.dest, item.source, item.mode)
        elif item.sha256 is None:
            writer.add_file(item.dest, item.source, item.mode)
        else:
            _add_planned(writer, item)


def files_blob(store: Store, name: str, epoch: int, items: Iterable[FileItem]) -> Blob:
    def body(sink: HashingWriter) -> None:
        writer = TarWriter(sink, mtime=epoch)
        write_files(writer, items)
        writer.close()

    return make_blob(store, name, body)
