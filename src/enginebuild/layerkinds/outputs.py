"""A component's outputs (a prefix, paths, or wheels), copied into the runtime."""

from __future__ import annotations

import tarfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from enginebuild.core.keys import unkeyed
from enginebuild.io.tarrules import clean_name
from enginebuild.layerkinds.base import INSTALL_WRITER, CopiedOutputs, LayerPayload, WriteJob
from enginebuild.recipe.model import Outputs

if TYPE_CHECKING:
    from enginebuild.io.tars import TarWriter


@dataclass(frozen=True)
class OutputTree(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = INSTALL_WRITER
    component: str = field(metadata=unkeyed("its name, for messages: its bytes are its build's (component_key)"))
    component_key: str
    outputs: Outputs
    site_packages: str = ""  # where a wheels output is installed
    interpreter: str = "/usr/bin/python3"
    editable_tree: bool = False  # the tree an editable wheel of this image points at

    def write(self, job: WriteJob, writer: TarWriter) -> None:
        from enginebuild.layerkinds.installer import install_wheel

        record = job.outputs[self.component_key]
        if self.outputs.kind == "wheels":
            for filename, sha, _ in sorted(record.wheels):
                install_wheel(job.store.whole(sha, filename), filename, self.site_packages, self.interpreter,
                              writer)
            return
        root = clean_name(self.outputs.to) if self.outputs.kind == "prefix" else ""
        with tarfile.open(job.store.whole(record.sha256, f"outputs of {self.component}"), "r:") as tar:
            for member in tar:
                member.name = f"{root}/{member.name}" if root else member.name
                if member.islnk() and root:
                    member.linkname = f"{root}/{clean_name(member.linkname)}"
                writer.add_member(member, tar.extractfile(member) if member.isreg() else None)

    def describe(self, name: str, folder: str) -> str:
        paths = " ".join(self.outputs.paths)
        to = self.outputs.to if self.outputs.kind == "prefix" else "/"
        return f"COPY --from=component:{self.component} {paths} {to}   # enginebuild: outputs only"

    def made_by(self) -> str:
        return self.component_key

    def copied_outputs(self) -> CopiedOutputs | None:
        return None if self.outputs.kind == "wheels" else CopiedOutputs(self.component, self.outputs)

    def python_site(self) -> tuple[str, str] | None:
        return (self.interpreter, self.site_packages) if self.site_packages else None
