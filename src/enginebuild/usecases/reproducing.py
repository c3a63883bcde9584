"""Reproducing images, the use case behind `reproduce`: each image and platform rebuilt from its
lock with nothing reused and compared layer by layer (execution/reproduce.py), against what this
engine built or what a registry holds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from enginebuild.execution.reproduce import reproduce
from enginebuild.execution.secretscan import Scanner
from enginebuild.io.store import Store
from enginebuild.plan.image import plan_image
from enginebuild.usecases.targets import platforms_of
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.execution.reproduce import Reproduction
    from enginebuild.oci.reference import ImageRef


def reproduce_images(ws: Workspace, names: list[str], platforms: list[str],
                     against: ImageRef | None) -> Iterator[Reproduction]:
    """Each image and platform asked, rebuilt and compared, as it finishes."""

    ws.sweep()
    for name in dict.fromkeys(names):
        spec = ws.spec(name)
        lock = ws.lock(spec)
        for platform in platforms_of(spec, platforms):
            yield reproduce(ws.home, plan_image(spec, lock, platform, ws.plan_options()),
                            Scanner(spec, store=Store(ws.home)), against, mirrors=ws.mirrors)
