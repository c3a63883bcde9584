"""A `files:` group (or several small ones): the recipe's files and pinned downloads, one
deterministic tar (the same writer as the file-edit path's, layerkinds/filelayer.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from enginebuild.layerkinds.base import Download, LayerPayload, TailFile, WriteJob
from enginebuild.recipe.model import FileEntry

if TYPE_CHECKING:
    from enginebuild.io.tars import TarWriter


@dataclass(frozen=True)
class Files(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = ("layerkinds/filelayer.py", "io/tars.py")
    entries: tuple[FileEntry, ...]
    digests: tuple[str, ...] = ()  # each entry's sha256 when planned, in order

    def write(self, job: WriteJob, writer: TarWriter) -> None:
        from enginebuild.layerkinds.filelayer import FileItem, write_files

        write_files(writer, [
            FileItem(e.dest, e.mode, e.src, job.inputs[f"file {e.display}"], e.display) if e.src is not None
            else FileItem(e.dest, e.mode, job.store.verified(str(e.sha256), e.display), None, e.display)
            for e in self.entries])

    def downloads(self) -> list[Download]:
        return [Download(e.sha256, (e.url,), e.display) for e in self.entries if e.url and e.sha256]

    def describe(self, name: str, folder: str) -> str:
        return f"COPY {folder}/ /   # enginebuild: " + ", ".join(e.dest for e in self.entries[:4]) + (
            " ..." if len(self.entries) > 4 else "")

    def tail_files(self) -> list[TailFile]:
        return [TailFile(e.dest, e.mode, path=e.src, sha256=e.sha256) for e in self.entries]

    def copied_files(self) -> tuple[FileEntry, ...]:
        return self.entries
