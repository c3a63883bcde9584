"""The checks a build runs on the image it made, each a `Check` (checks/check.py): those that read
the image's bytes (kernels, when the spec declares cuda-archs; the runtime closure, always), then
those run in containers of the loaded image (the import check, when the spec asks; the behaviour
checks of every patch it is built with), the two of these side by side.

The byte-reading checks' verdict is kept in the store under what they read (the layers no inert
layer is among, registrycache/inert.py, and the settings they are asked with), and recorded in the
registry cache for bytes this run made: either answers for an image that differs only in layers
those checks read nothing in. An image whose layers the registry cache stood in takes the verdict
the run that checked those bytes recorded there (without one, the stood-in layers are fetched and
checked here). A failing check stops the build, naming what failed; the image is built and tagged."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from enginebuild.checks.behaviour import image_checks, run_checks
from enginebuild.checks.check import Check, Judged
from enginebuild.checks.imports import check_imports
from enginebuild.checks.verdicts import Verdicts
from enginebuild.errors import command
from enginebuild.io.background import Background, settled
from enginebuild.io.store import Store
from enginebuild.kernels.image import declared_of, verify_plan
from enginebuild.kernels.runtime import check_plan
from enginebuild.oci.engine import EngineApi
from enginebuild.plan.model import ImagePlan
from enginebuild.recipe.model import ImageSpec
from enginebuild.registrycache import substitutes
from enginebuild.registrycache.cache import LayerCache

if TYPE_CHECKING:
    from enginebuild.lock.lockfile import Lock


@dataclass(frozen=True)
class Asked:
    """What the checks are asked about: the image's spec, lock and plan, what the build made."""

    spec: ImageSpec
    lock: Lock
    plan: ImagePlan
    config: bytes  # the image's config as built (its layers' digests name what the checks read)
    made: bool  # whether this run built or wrote any of it (then its verdict goes to the cache)
    substituted: bool  # whether the registry cache stood in any of its layers
    loaded: bool  # whether the image is in the engine (--no-load leaves none to run containers of)


def check_built(store: Store, engine: EngineApi, built: Asked, cache: LayerCache | None,
                say: Callable[[str], None]) -> None:
    """Every check of the image, or the verdict kept for the bytes ones (see the module's doc)."""
    key = substitutes.verdict_key(check_settings(built.spec), built.plan.platform, built.config, store)
    verdicts = Verdicts(store)
    kept = verdicts.kept("bytes", key)
    if kept is not None and not built.substituted:
        for name, line in dict(kept.found["lines"]).items():
            say(f"  {name}: {line} (the verdict kept when the layers these checks read were checked)")
        check_in_containers(store, engine, built, say)
        if cache is not None and built.made:
            substitutes.put_verdict(cache, store, key, dict(kept.found["lines"]))
        return
    if built.substituted:
        known = substitutes.verdict(cache, store, key) if cache is not None else None
        if known and cache is not None:
            for name, line in known.items():
                say(f"  {name}: {line} (the verdict recorded in {cache.name} by the run that checked these bytes)")
            return
        substitutes.realize_all(store, built.plan.runtime.layers)
    lines = {}
    for check in byte_checks(store, engine.save, built):
        said = check.verdict(check.run())
        for line in said:
            say(f"  {check.name}: {line}")
        lines[check.name] = said[-1]
    verdicts.keep("bytes", key, {"lines": lines})
    check_in_containers(store, engine, built, say)
    if cache is not None and built.made:  # a run that made nothing stays off the network
        substitutes.put_verdict(cache, store, key, lines)


def byte_checks(store: Store, save: Callable[[str], AbstractContextManager[IO[bytes]]], built: Asked) -> list[Check]:
    """The checks that read the image's bytes: its kernels (only where the spec declares
    cuda-archs) and its runtime closure."""
    spec, plan = built.spec, built.plan
    checks = []
    if declared_of(spec):
        checks.append(Check("kernels", lambda: verify_plan(spec, built.lock, plan, store),
                            "the kernel architecture check failed",
                            f"the image is built and tagged; it lacks kernels for what it declares "
                            f"(`{command()} verify {spec.name} --json` lists every binary)"))
    checks.append(Check(
        "runtime", lambda: check_plan(spec, plan, store, save), "the runtime-closure check failed",
        f"the image is built and tagged; add the package that ships each library to the runtime's packages, "
        f"or skip a binary that is truly optional with its reason (runtime-check.skip); `{command()} verify "
        f"{spec.name} --json` lists everything"))
    return checks


def container_checks(store: Store, engine: EngineApi, spec: ImageSpec, plan: ImagePlan) -> list[Check]:
    """The checks run in containers of the loaded image: the import check (where the spec asks)
    and the behaviour checks of every patch it is built with."""
    checks = []
    imports = spec.runtime_check.imports
    if imports is not None:
        checks.append(Check(
            "python", functools.partial(check_imports, engine, plan.tag, plan, imports, store),
            "the import check failed",
            "the image is built and tagged; a module that needs what a container here lacks can be given its "
            "variables (runtime-check.imports.env) or skipped with the reason (runtime-check.imports.skip)",
            what="imports"))
    patches = image_checks(spec, plan)
    if patches:
        checks.append(Check(
            "patches", functools.partial(run_checks, engine, plan.tag, plan, patches, store),
            "a patch's behaviour check failed",
            "the image is built and tagged; the patch does not do what its checks say "
            "(patches/<component>/<name>.checks.yaml), or the check expects the wrong output",
            indent="  ", what=f"{len(patches)} behaviour check(s)"))
    return checks


def check_in_containers(store: Store, engine: EngineApi, built: Asked, say: Callable[[str], None]) -> None:
    """The container checks side by side (each is mostly one Python process importing the engine,
    one CPU); both end before either verdict is said. With the image not loaded, what was not run."""
    spec, plan = built.spec, built.plan
    checks = container_checks(store, engine, spec, plan)
    if not built.loaded:
        for check in checks:
            say(f"  {check.name}: {spec.name} ({plan.platform}): {check.what} not run: --no-load leaves no image in the "
                f"engine to run them in (`{command()} verify {spec.name}` runs them once it is loaded)")
        return
    pool = Background(2, "enginebuild-checks")
    try:
        running: list[tuple[Check, Future[Judged]]] = [(c, pool.submit(c.run)) for c in checks]
        for _, future in running:
            _completed_or_failed(future)
        for check, future in running:
            for line in check.verdict(future.result()):
                say(f"  {check.name}: {line}")
    finally:
        pool.cancel()


def _completed_or_failed(future: Future[Judged]) -> None:
    try:
        settled(future)
    except Exception:  # noqa: BLE001 - raised again by .result() where it is reported
        pass


def check_settings(spec: ImageSpec) -> object:
    """What the byte-reading checks are asked, beyond the image's own bytes and config."""
    return (spec.name, spec.cuda_archs, spec.cuda_verify, spec.runtime_check,
            tuple((c.name, c.cuda_archs) for c in spec.components))

