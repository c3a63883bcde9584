"""Checking built images against what they claim: `reproduce` (rebuilt from the lock with nothing
reused, compared layer by layer) and `verify` (the kernel architectures every CUDA binary
carries). The verbs parse arguments and print; these plan each image and platform and check."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.build.reproduce import Reproduction
    from enginebuild.kernels.image import Verdict
    from enginebuild.oci.reference import ImageRef


def reproduce_images(ws: Workspace, names: list[str], platforms: list[str],
                     against: ImageRef | None) -> Iterator[Reproduction]:
    """Each image and platform asked, rebuilt and compared, as it finishes."""
    from enginebuild.build.reproduce import reproduce
    from enginebuild.plan.image import plan_image
    from enginebuild.usecases.building import platforms_of

    ws.sweep()
    for name in dict.fromkeys(names):
        spec = ws.spec(name)
        lock = ws.lock(spec)
        for platform in platforms_of(spec, platforms):
            yield reproduce(ws.home, plan_image(spec, lock, platform, ws.plan_options()), against)


def verify_images(ws: Workspace, names: list[str], platforms: list[str],
                  judged: tuple[str, ...] = ()) -> Iterator[Verdict | str]:
    """Each image and platform asked, its binaries checked, as it finishes; the name of an image
    that declares no cuda-archs (nothing asked of its kernels, not a failure)."""
    from enginebuild.io.store import Store
    from enginebuild.kernels.image import declared_of, verify_plan
    from enginebuild.plan.image import plan_image
    from enginebuild.usecases.building import platforms_of

    for name in dict.fromkeys(names):
        spec = ws.spec(name)
        lock = ws.lock(spec)
        if not declared_of(spec) and not judged:
            yield name
            continue
        for platform in platforms_of(spec, platforms):
            yield verify_plan(spec, lock, plan_image(spec, lock, platform, ws.plan_options()), Store(ws.home), judged)
