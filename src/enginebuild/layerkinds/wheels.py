"""Python distributions of the lock installed by enginebuild's wheel installer into one layer
(plan/wheelgroups.py says which share it); those replacing a version the base ships delete its
files (whiteouts read from the base's RECORD)."""

from __future__ import annotations

import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from enginebuild.core.keys import unkeyed
from enginebuild.errors import BuildFailed
from enginebuild.layerkinds.base import INSTALL_WRITER, Download, LayerPayload, WriteJob
from enginebuild.lock.pins import PyPin

if TYPE_CHECKING:
    from enginebuild.io.tars import TarWriter


@dataclass(frozen=True)
class Wheels(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = INSTALL_WRITER
    pins: tuple[PyPin, ...]
    site_packages: str
    interpreter: str
    # the base whose distributions some of these replace
    base: str = field(default="", metadata=unkeyed("the base by name, for messages: its digest (base_digest) is "
                                                   "keyed where files of it are removed"))
    removes: tuple[tuple[str, str], ...] = ()  # (name, its .dist-info folder in the base): files to delete
    base_digest: str | None = ""  # that base's digest (what the deletions were read from), with removes only

    def write(self, job: WriteJob, writer: TarWriter) -> None:
        from enginebuild.layerkinds.installer import install_wheels, record_paths, removals, whiteout

        wheels = [(job.store.whole(pin.sha256, pin.filename), pin.filename) if pin.sha256
                  else built_wheel(job, pin) for pin in self.pins]
        written = install_wheels(wheels, self.site_packages, self.interpreter, writer)
        for folder, record in self.base_records(job) if self.removes else []:
            for gone in removals(record_paths(record, folder), folder, self.site_packages, written):
                whiteout(writer, gone)

    def base_records(self, job: WriteJob) -> list[tuple[str, bytes]]:
        """The RECORD of each distribution of the base these wheels replace, read from the base."""
        job.puller.ensure_pulled(self.base)
        out = []
        with job.engine.container(self.base) as container:
            for name, folder in self.removes:
                with job.engine.archive(container, f"/{folder}/RECORD") as stream:
                    data = None
                    if stream is not None:
                        with tarfile.open(fileobj=stream, mode="r|") as tar:
                            member = next(iter(tar), None)
                            handle = tar.extractfile(member) if member is not None and member.isreg() else None
                            data = handle.read() if handle is not None else None
                if data is None:
                    raise BuildFailed(f"{name} replaces the version of the base {self.base}, but the base has no "
                                      f"/{folder}/RECORD saying which files are that version's",
                                      hint="a distribution installed without a RECORD cannot be replaced file by file; "
                                           "keep the base's version")
                out.append((folder, data))
        return out

    def stands_alone(self) -> bool:
        return not self.removes  # deleting the base's files reads the chain below

    def git_pins(self) -> tuple[PyPin, ...]:
        return tuple(pin for pin in self.pins if pin.origin == "git")

    def downloads(self) -> list[Download]:
        return [Download(p.sha256, (p.url,), p.filename, p.size, p.index, p.name, p.filename)
                for p in self.pins if p.sha256]

    def describe(self, name: str, folder: str) -> str:
        return f"# enginebuild: {name} installed into {self.site_packages}"

    def python_site(self) -> tuple[str, str]:
        return self.interpreter, self.site_packages


def built_wheel(job: WriteJob, pin: PyPin) -> tuple[Path, str]:
    """The wheel `fetch` built from a git source."""
    record = job.store.record("built-wheels", f"{pin.name}-{pin.commit}")
    if record is None:
        raise BuildFailed(f"python {pin.name} from git {pin.commit[:12]} has no built wheel (run `fetch`)")
    return job.store.whole(str(record["sha256"]), str(record["filename"])), str(record["filename"])
