"""One generated file: the manifest the image carries, the first layer of its tail."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from enginebuild.layerkinds.base import LayerPayload, TailFile, WriteJob

if TYPE_CHECKING:
    from enginebuild.io.tars import TarWriter


@dataclass(frozen=True)
class Data(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = ("io/tars.py",)
    dest: str
    data: bytes = field(repr=False)
    starts_tail: ClassVar[bool] = True

    def write(self, job: WriteJob, writer: TarWriter) -> None:
        writer.add_bytes(self.dest, self.data)

    def engine_files(self) -> bool:
        return False  # enginebuild's own manifest

    def describe(self, name: str, folder: str) -> str:
        return f"COPY {folder}/ /   # enginebuild: {self.dest}"

    def tail_files(self) -> list[TailFile]:
        return [TailFile(self.dest, 0o644, data=self.data)]
