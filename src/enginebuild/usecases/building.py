"""Building images, the use case behind `image` (and `push`'s remake of a damaged image), as a
pipeline per platform: plan (patch stacks applied first, stackcheck.py; what patches applied as
files stand on, learning.py) -> build (on the builders, executors.py) -> record (tags, the no-op
memo and the fast-edit record, remembering.py) -> check (kernels, closure, imports, the patches'
behaviour, checks/afterbuild.py) -> `--output` folders (outputfolders.py). The plans built are
returned (`image --push` hands them to pushing.py). The verb only parses its arguments into a
`BuildRequest` (buildrequest.py); `lock_first` (locking.py) runs before it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from enginebuild.checks.afterbuild import Asked, check_built
from enginebuild.errors import UserError
from enginebuild.execution.runstate import Outcome
from enginebuild.io import faults
from enginebuild.io.progress import output
from enginebuild.io.store import BadBlob, Store
from enginebuild.plan.image import Options, plan_image
from enginebuild.plan.model import ImagePlan
from enginebuild.recipe.model import ImageSpec
from enginebuild.registrycache.cache import LayerCache, cache_from_settings
from enginebuild.state.lastsettings import remember_settings
from enginebuild.usecases.buildrequest import BuildRequest, Built, ignore
from enginebuild.usecases.executors import engine_first, executor_for
from enginebuild.usecases.learning import learn_routes, patched_files
from enginebuild.usecases.outputfolders import write_outputs
from enginebuild.usecases.remembering import RunMemory
from enginebuild.usecases.stackcheck import check_stacks_first
from enginebuild.usecases.targets import platforms_of
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.lock.lockfile import Lock


ATTEMPTS = 3


def build_image(ws: Workspace, name: str, request: BuildRequest, options: Options,
                report: Callable[[Built], None] = ignore) -> list[ImagePlan]:
    """Build one image for the platforms asked (all of the spec's by default); the plans built
    (what `image --push` pushes, not planned again). Each platform is reported as soon as its
    image exists, before its checks: plan -> build -> record -> check, one platform after another."""
    start = time.monotonic()
    ws.select([name], all_when_empty=False)
    spec = ws.spec(name)
    lock = ws.lock(spec)
    platforms, listed = _platforms(spec, request, options)
    memory = RunMemory.start(ws, name, options, tuple(request.platform))  # the inputs, before the plan reads them
    engine_first(ws, request)
    cache = cache_from_settings(ws.root, request.cache, request.no_cache, request.cache_readonly)
    built: list[ImagePlan] = []
    for platform in platforms:
        plan = _planned(ws, spec, lock, platform, options, request, cache)
        outcome = build_platform(ws, spec, plan, request, cache, listed)
        built.append(plan)
        tags = memory.recorded(plan, outcome, request, listed)
        report(Built(name, platform, tuple(what_was_done(plan, outcome, cache)), time.monotonic() - start,
                     tags[-1] if request.load else f"not loaded (image {outcome.image_id[:19]})"))
        for comp_name, size in sorted(outcome.output_sizes.items()):
            if f"component {comp_name}" not in outcome.built:  # a built one said its size as it finished
                output().say(f"  component {comp_name}: outputs {size} bytes")
        if not options.on and lock is not None:  # a lock made the plan; the check reads its pins
            check_built(Store(ws.home), ws.engine(), Asked(spec, lock, plan, outcome.config,
                                                          bool(outcome.built or outcome.written),
                                                          bool(outcome.substituted), request.load),
                        cache, output().say)
        if request.outputs:
            write_outputs(ws, plan, tags[0], request.outputs, platform if len(platforms) > 1 else None)
    remember_settings(Store(ws.home), name, ws.overrides)
    memory.store(request)
    return built


def _platforms(spec: ImageSpec, request: BuildRequest, options: Options) -> tuple[list[str], tuple[str, ...]]:
    """The platforms this run builds, and those the plain tag is chosen among (the spec's: the plain
    tag belongs to one platform of the spec, whichever platforms this run builds)."""
    if options.on and not request.platform:
        raise UserError("--on: give the stand-in base's platform with --platform (for example linux/amd64)")
    platforms = list(request.platform) if options.on else platforms_of(spec, request.platform)
    return platforms, tuple(platforms) if options.on else tuple(spec.platforms)


def _planned(ws: Workspace, spec: ImageSpec, lock: Lock | None, platform: str, options: Options,
             request: BuildRequest, cache: LayerCache | None) -> ImagePlan:
    """The platform's plan, with what its patches applied as files stand on learned first."""
    plan = plan_image(spec, lock, platform, options)
    faults.reached("image.planned")
    check_stacks_first(ws, plan)
    if patched_files(plan):
        learnt = learn_routes(ws, spec, lock, plan, options,
                              executor_for(ws, spec, request, cache, rebuild=False), locked=request.locked)[0]
        if learnt is not plan:
            plan = learnt
            check_stacks_first(ws, plan)
    return plan


def what_was_done(plan: ImagePlan, outcome: Outcome, cache: LayerCache | None) -> list[str]:
    """A platform's build in words: components built, command layers run, layers written, pulled,
    substituted; or that only the image's config changed."""
    done = []
    order = {f"component {c.name}": i for i, c in enumerate(plan.components)}
    components = sorted((n for n in outcome.built if n.startswith("component ")), key=lambda n: order.get(n, 0))
    commands = [n for n in outcome.built if not n.startswith("component ")]
    if components:
        done.append(f"built {len(components)} component(s) ({', '.join(n[10:] for n in components)})")
    if commands:
        done.append(f"ran {len(commands)} command layer(s)")
    if outcome.written:
        early = f" ({outcome.preloaded} loaded into the engine before the image)" if outcome.preloaded else ""
        done.append(f"wrote {len(outcome.written)} layer(s){early}")
    if outcome.pulled:
        done.append(f"pulled {len(outcome.pulled)} from the cache")
    if outcome.substituted and cache is not None:
        done.append(f"took {len(outcome.substituted)} layer(s) from {cache.name} without their bytes")
    if not done and outcome.replaced and outcome.same_layers:  # every layer there: what changed is the configuration
        done.append("only the image's config changed (env, labels, entrypoint...): a new image, no layer made")
    elif not done and outcome.replaced:
        done.append("no layer made: a new image of layers made before (not those of the image it replaces, or "
                    "not in their order)")
    return done


def build_platform(ws: Workspace, spec: ImageSpec, plan: ImagePlan, request: BuildRequest, cache: LayerCache | None,
                   platforms: tuple[str, ...]) -> Outcome:
    """Build one platform's plan. A stored file found damaged on the way has been named and
    deleted (see io/store.py); the build then runs again and makes or fetches it anew."""

    for attempt in range(1, ATTEMPTS + 1):
        executor = executor_for(ws, spec, request, cache)
        try:
            return executor.build(plan, platforms, load=request.load)
        except BadBlob as exc:
            if attempt == ATTEMPTS:
                raise
            output().say(f"  warning: {exc.message}; building again without it")
    raise AssertionError("unreachable")


