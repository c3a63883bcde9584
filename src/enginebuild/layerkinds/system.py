"""System packages unpacked by enginebuild (`install: extract`): the pinned .debs' data, merged."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from enginebuild.core.keys import unkeyed
from enginebuild.layerkinds.base import Download, LayerPayload, WriteJob
from enginebuild.lock.pins import DebPin

if TYPE_CHECKING:
    from enginebuild.io.tars import TarWriter


@dataclass(frozen=True)
class Sysroot(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = ("layerkinds/debfile.py", "io/tars.py", "io/unpack.py")
    debs: tuple[DebPin, ...]
    urls: tuple[str, ...] = field(metadata=unkeyed("where the .debs are downloaded from: their sha256 are keyed"))

    def write(self, job: WriteJob, writer: TarWriter) -> None:
        from enginebuild.layerkinds.debfile import write_sysroot

        write_sysroot([(job.store.whole(d.sha256, f"{d.name} {d.version}"), d.name) for d in self.debs], writer)

    def engine_files(self) -> bool:
        return False  # a distribution's packages

    def downloads(self) -> list[Download]:
        return [Download(d.sha256, (url,), f"{d.name} {d.version} (.deb)", d.size)
                for d, url in zip(self.debs, self.urls, strict=False)]

    def unpacked_packages(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.debs)

    def describe(self, name: str, folder: str) -> str:
        return f"ADD system.tar /   # enginebuild: {len(self.debs)} pinned .debs unpacked"
