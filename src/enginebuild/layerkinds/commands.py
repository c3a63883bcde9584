"""Commands BuildKit runs on the chain below (`system.run`, `dpkg -i`, `steps`); the layers they
write are cut out of its result and normalised (execution/executor.py runs them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from enginebuild.core import keys
from enginebuild.layerkinds.base import Commands, Download, LayerPayload
from enginebuild.layerkinds.context import ContextItem, FromBlob


@dataclass(frozen=True)
class Run(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = ("execution/normalize.py", "io/tars.py")
    unkeyed: ClassVar[dict[str, str]] = {
        "distribution": "whether what it writes is a distribution's packages, for the checks that read the image"}
    dockerfile: str
    context: tuple[ContextItem, ...]
    secrets: tuple[str, ...] = ()
    platform: str = ""
    distribution: bool = False  # the system's commands (dpkg -i, system.run): a distribution's packages
    by_command: ClassVar[bool] = True

    def engine_files(self) -> bool:
        return not self.distribution

    def key(self, epoch: int) -> str:
        """The commands and their context, not the chain below (the chain key folds that in);
        the epoch is in the Dockerfile."""
        body = "\n".join(line for line in self.dockerfile.splitlines() if not line.startswith("FROM "))
        return keys.key_of("run", platform=self.platform, dockerfile=body, secrets=list(self.secrets),
                           context=[[c.arcname, c.mode, c.digest] for c in self.context])

    def stands_alone(self) -> bool:
        return False

    def commands(self) -> Commands:
        return Commands(self.dockerfile, self.context, self.secrets)

    def downloads(self) -> list[Download]:
        return [Download(c.origin.sha256, c.origin.urls, c.origin.what, c.origin.size) for c in self.context
                if isinstance(c.origin, FromBlob)]

    def describe(self, name: str, folder: str) -> str:
        body = [line for line in self.dockerfile.splitlines() if line.startswith("RUN")]
        return "\n".join(body) + "   # BuildKit, then normalised"
