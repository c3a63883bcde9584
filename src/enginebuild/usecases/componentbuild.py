"""Building components alone, the use case behind `image --component NAME`: those components
(and what they need) built or taken from the registry cache, their outputs pushed to it; no
image is assembled (a CI job per component; the last job assembles from the cache)."""

from __future__ import annotations

import time
from collections.abc import Callable

from enginebuild.io.progress import output
from enginebuild.plan.image import Options, plan_image
from enginebuild.registrycache.cache import cache_from_settings
from enginebuild.usecases.buildrequest import BuildRequest, Built, ignore
from enginebuild.usecases.executors import executor_for
from enginebuild.usecases.stackcheck import check_stacks_first
from enginebuild.usecases.targets import platforms_of
from enginebuild.workspace import Workspace


def build_components(ws: Workspace, name: str, request: BuildRequest, options: Options,
                     report: Callable[[Built], None] = ignore) -> None:
    """--component: those components (and what they need) built or taken from the cache, their
    outputs pushed to it; the image is not assembled."""

    ws.select([name], all_when_empty=False)
    spec = ws.spec(name)
    cache = cache_from_settings(ws.root, request.cache, request.no_cache, request.cache_readonly)
    if cache is None:
        output().say("  note: no cache is configured: the outputs stay in this machine's store")
    for platform in platforms_of(spec, request.platform):
        start = time.monotonic()
        plan = plan_image(spec, ws.lock(spec), platform, options)
        check_stacks_first(ws, plan)
        executor = executor_for(ws, spec, request, cache)
        executor.components(plan, frozenset(request.component))
        executor.fill_cache()
        outcome = executor.outcome
        built = [n[10:] for n in outcome.built if n.startswith("component ")]
        done = [f"built {', '.join(built)}"] if built else []
        done += [f"pulled {len(outcome.pulled)} from the cache"] if outcome.pulled else []
        done += [f"reused {outcome.reused}"] if outcome.reused else []
        report(Built(name, platform, tuple(done), time.monotonic() - start, cache.name if cache else "",
                     components=tuple(request.component)))
