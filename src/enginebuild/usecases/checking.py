"""Checking built images against what they claim: `reproduce` (rebuilt from the lock with nothing
reused, compared layer by layer) and `verify` (the kernel architectures every CUDA binary
carries). The verbs parse arguments and print; these plan each image and platform and check."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import IO, TYPE_CHECKING

from enginebuild.build import substitutes
from enginebuild.build.imports import Imports, check_imports
from enginebuild.build.reproduce import reproduce
from enginebuild.build.secretscan import Scanner
from enginebuild.errors import command
from enginebuild.io.store import Store
from enginebuild.kernels.image import declared_of, verify_plan
from enginebuild.kernels.runtime import check_plan
from enginebuild.oci.engine import Engine
from enginebuild.plan.image import plan_image
from enginebuild.usecases.targets import platforms_of
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.build.imports import Imports
    from enginebuild.build.reproduce import Reproduction
    from enginebuild.kernels.closure import Closure
    from enginebuild.kernels.image import Verdict
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
                            Scanner(spec, store=Store(ws.home)), against)


def verify_images(ws: Workspace, names: list[str], platforms: list[str],
                  judged: tuple[str, ...] = ()) -> Iterator[tuple[Closure, Verdict | None, Imports | None]]:
    """Each image and platform asked, as it finishes: its runtime closure, its kernels' verdict
    (None for an image that declares no cuda-archs: nothing asked of its kernels, not a failure),
    and its imports (None unless the spec asks: `runtime-check.imports`)."""

    def save(ref: str) -> AbstractContextManager[IO[bytes]]:
        return Engine().save(ref)

    for name in dict.fromkeys(names):
        spec = ws.spec(name)
        lock = ws.lock(spec)
        for platform in platforms_of(spec, platforms):
            plan = plan_image(spec, lock, platform, ws.plan_options())
            substitutes.realize_all(Store(ws.home), plan.runtime.layers)  # stood-in layers' bytes, to read
            closure = check_plan(spec, plan, Store(ws.home), save)
            verdict = verify_plan(spec, lock, plan, Store(ws.home), judged) if declared_of(spec) or judged else None
            imports = None
            if spec.runtime_check.imports is not None:

                engine = Engine()
                if engine.inspect(plan.tag) is None:  # built with --no-load, or removed since
                    imports = Imports(spec.name, plan.platform, failed=[(
                        "(not run)", f"the engine has no {plan.tag} to import its packages in: "
                                     f"`{command()} image {spec.name} --platform {plan.platform}` loads it")])
                else:
                    imports = check_imports(engine, plan.tag, plan, spec.runtime_check.imports, Store(ws.home))
            yield closure, verdict, imports
