"""Commands BuildKit runs on the chain below (`system.run`, `dpkg -i`, `steps`); the layers they
write are cut out of its result and normalised (execution/executor.py runs them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from enginebuild.core.keys import keyed_as, unkeyed
from enginebuild.layerkinds.base import Commands, Download, LayerPayload
from enginebuild.layerkinds.context import ContextItem, FromBlob


def _commands(dockerfile: str) -> str:
    """A Dockerfile without its FROM lines: the commands, not the chain below they run on."""
    return "\n".join(line for line in dockerfile.splitlines() if not line.startswith("FROM "))


@dataclass(frozen=True)
class Run(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = ("execution/normalize.py", "io/tars.py")
    # the epoch is in it
    dockerfile: str = field(metadata=keyed_as(_commands, "the FROM line names the chain below, which the chain key "
                                                         "folds in"))
    context: tuple[ContextItem, ...]
    secrets: tuple[str, ...] = ()
    platform: str = ""
    # the system's commands (dpkg -i, system.run): a distribution's packages
    distribution: bool = field(default=False, metadata=unkeyed(
        "whether what it writes is a distribution's packages, for the checks that read the image"))
    by_command: ClassVar[bool] = True

    def engine_files(self) -> bool:
        return not self.distribution

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
