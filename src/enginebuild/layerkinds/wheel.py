"""The wheels a component of this image builds, installed by enginebuild's wheel installer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from enginebuild.core.keys import unkeyed
from enginebuild.errors import BuildFailed, command
from enginebuild.layerkinds.base import INSTALL_WRITER, LayerPayload, WriteJob
from enginebuild.lock.pins import PyPin

if TYPE_CHECKING:
    from enginebuild.io.tars import TarWriter


@dataclass(frozen=True)
class Wheel(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = INSTALL_WRITER
    pin: PyPin = field(metadata=unkeyed("the lock's entry for the wheel a component of this image builds: its "
                                        "bytes are that build's (component_key)"))
    site_packages: str
    interpreter: str
    component_key: str = ""  # for a wheel a component of this image builds
    closure: tuple[tuple[str, str], ...] | None = None  # what the lock holds, which the wheel's needs must match
    # the marker environment its needs are read for
    target: tuple[tuple[str, str], ...] = field(default=(), metadata=unkeyed(
        "the marker environment its needs are checked in (read, not written): the interpreter and site it installs "
        "into are keyed"))
    editable: str = ""  # the tree an editable wheel points at (recorded in direct_url.json, as pip does)
    excluded: tuple[str, ...] = ()  # needs the spec left out (`exclude`): not asked of the lock
    # the wheels other components of this image build (name, version): what may meet an excluded need
    provided: tuple[tuple[str, str], ...] = ()

    def write(self, job: WriteJob, writer: TarWriter) -> None:
        from enginebuild.layerkinds.installer import install_wheel, unmet_requirements

        for filename, sha, _ in sorted(job.outputs[self.component_key].wheels):
            wheel = job.store.whole(sha, filename)
            unmet = unmet_requirements(wheel, self.closure, self.target, self.excluded, self.provided) \
                if self.closure is not None else []
            if unmet:
                raise BuildFailed(f"{filename} (built by component {self.pin.component}) needs what the lock did "
                                  f"not resolve: {'; '.join(unmet)}",
                                  hint="its source states other needs than the wheel: point `requires-from` at the "
                                       f"files its build reads, then `{command()} lock {job.image}`")
            install_wheel(wheel, filename, self.site_packages, self.interpreter, writer, self.editable)

    def describe(self, name: str, folder: str) -> str:
        return f"# enginebuild: python {self.pin.name} (built by component {self.pin.component}) installed into " \
               f"{self.site_packages}"

    def made_by(self) -> str:
        return self.component_key

    def python_site(self) -> tuple[str, str]:
        return self.interpreter, self.site_packages
