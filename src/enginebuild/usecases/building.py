"""Building images, the use case behind `image` (and `push`'s remake of a damaged image): lock
what the spec asks for and the lock lacks, plan each platform, apply patch stacks first, build
on the builders, check kernels and the runtime closure, record the no-op memo and the
fast-edit record, write `--output` folders; the plans built are returned (`image --push`
hands them to pushing.py). The verb only parses its arguments into a `BuildRequest`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild import fastedit
from enginebuild.checks.afterbuild import Asked, check_built
from enginebuild.errors import LockWouldChange, UserError, command
from enginebuild.execution.componentwork import output_record
from enginebuild.execution.executor import Executor
from enginebuild.execution.export import export_component, export_runtime
from enginebuild.execution.runstate import Outcome, local_tags
from enginebuild.execution.secretscan import Scanner
from enginebuild.io import faults
from enginebuild.io.progress import output
from enginebuild.io.store import BadBlob, Store
from enginebuild.layerkinds.context import FromSource
from enginebuild.lock.lockfile import input_where, stale_inputs
from enginebuild.oci.engine import EngineApi, EngineUnavailable, holds
from enginebuild.patches.check import check_stack
from enginebuild.patches.patched import patched_tree, stack_failure
from enginebuild.plan.image import Options, plan_image
from enginebuild.plan.model import ImagePlan
from enginebuild.plan.render import TEMPLATES
from enginebuild.recipe.model import ImageSpec
from enginebuild.registrycache.cache import LayerCache, cache_from_settings
from enginebuild.state.decision import decide
from enginebuild.state.lastsettings import remember_settings
from enginebuild.state.memo import ImageRun, PlanMemo, RunOptions, copied_paths, other_input_paths
from enginebuild.usecases.learning import learn_routes, patched_files
from enginebuild.usecases.locking import lock_image
from enginebuild.usecases.targets import builders_of, parse_local_tag, platforms_of
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.lock.lockfile import Lock


OutputFolders = tuple[Path | None, dict[str, Path]]  # --output: the runtime's folder, each component's


@dataclass(frozen=True)
class BuildRequest:
    """What a build is asked for beyond the image and its plan options."""

    platform: list[str] = field(default_factory=list)  # only these platforms (default: the spec's)
    builder: list[str] = field(default_factory=list)  # --builder values (default: enginebuild.yaml, else here)
    buildx_builder: str | None = None
    verbose: bool = False
    jobs: int | None = None
    cache: str | None = None
    no_cache: bool = False  # no registry cache
    rebuild: bool = False  # --no-cache: nothing reused but downloads
    cache_readonly: bool = False
    outputs: OutputFolders | None = None  # parsed --output: (runtime folder, {component: folder})
    component: list[str] = field(default_factory=list)  # build only these components (and their needs)
    push: bool = False
    to: str | None = None
    tag: list[str] = field(default_factory=list)  # tags to push
    local_tags: list[str] = field(default_factory=list)  # -t NAME[:TAG] (`{image}`: the image's name)
    tags_follow: bool = False  # the local tags are enginebuild.yaml's defaults: later builds move them too
    load: bool = True  # False (--no-load): the image is not loaded into the engine
    locked: bool = False  # --locked/--frozen: what the build learns may not change the routes file


@dataclass(frozen=True)
class Built:
    """One platform of an image built (or, with `components`, those components only): what was
    done, in words, how long it took, and what it answers to (a tag, or the image ID of an image
    not loaded; the registry cache that has the components' outputs)."""

    name: str
    platform: str
    done: tuple[str, ...]
    seconds: float
    result: str
    components: tuple[str, ...] = ()


def ignore(_: Built) -> None:
    """A build's report nobody reads."""


ATTEMPTS = 3


def lock_first(ws: Workspace, names: list[str], strict: bool) -> None:
    """Inputs the spec asks for and the lock does not pin: locked first (only those), or, with
    --locked/--frozen, refused naming them."""

    for name in names:
        spec = ws.spec(name)
        stale = stale_inputs(spec, ws.lock(spec))
        if not stale:
            continue
        if strict:
            first = stale[0][0]
            where = input_where(spec, first)
            raise LockWouldChange(f"{where}: {name}: the lock would change: "
                                  + "; ".join(f"{inp}: {why}" for inp, why in stale),
                                  hint=f"run `{command()} lock {name}` and commit lockfiles/{spec.lock_name}.lock, "
                                       "or build without --locked/--frozen")
        locked = lock_image(ws, name, stale_only=True)
        if locked.stale:  # on stderr, as cargo says "Locking": stdout stays the verb's own (plan --json)
            output().say(f"{name}: locked {', '.join(locked.stale)} into {locked.path}")


def check_stacks_first(ws: Workspace, plan: ImagePlan) -> None:
    """A component's patch stack is applied on the host before anything is built, so a patch that
    no longer applies stops the build at once, naming patch, file and hunk."""

    executor = Executor(ws.home, mirrors=ws.mirrors, scanner=Scanner(ws.spec(plan.image), store=Store(ws.home)), engine=ws.engine())
    for comp in plan.components:
        if comp.file_patches and comp.tree is not None and isinstance(comp.tree.origin, FromSource):
            # the whole stack on the source, as `patches check` applies it (those applied as files too)
            tree = comp.tree.origin.source.tree(ws.context(executor.http, plan.epoch))
            failure = check_stack([p.patch for p in comp.stack], tree).first_failure
            if failure is not None:
                raise stack_failure(comp.name, tree.description, failure, plan.image)
        if executor.output_record(comp) is not None:
            continue
        for item in comp.context:
            if isinstance(item.origin, FromSource) and item.origin.patches:
                o = item.origin
                patched_tree(ws.context(executor.http, plan.epoch), comp.name, o.source, o.patches,
                             item.digest, plan.image, o.only)


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
    asked = run_options(options, tuple(request.platform))
    _say_why_not_answered(ws, name, asked)
    _engine_first(ws, request)
    copied, others = copied_paths(ws.root, spec), other_input_paths(ws.root, spec, TEMPLATES)
    inputs = PlanMemo.snapshot(copied + others)  # before the plan reads them
    only_copied = sorted({str(p) for p in copied} - {str(p) for p in others})  # what fastedit.py may remake
    cache = cache_from_settings(ws.root, request.cache, request.no_cache, request.cache_readonly)
    results: list[ImageRun] = []
    built: list[ImagePlan] = []
    for platform in platforms:
        plan = _planned(ws, spec, lock, platform, options, request, cache)
        outcome = build_platform(ws, spec, plan, request, cache, listed)
        built.append(plan)
        tags = _recorded(ws, name, spec, plan, outcome, request, listed, only_copied, results)
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
    if asked.answerable() and not ws.overrides and request.load:
        PlanMemo(ws.home).store(asked.key(ws.root, name), inputs, results,
                                [la[3] for r in results for la in r.edit["layers"] if la[3]])
    return built


def _platforms(spec: ImageSpec, request: BuildRequest, options: Options) -> tuple[list[str], tuple[str, ...]]:
    """The platforms this run builds, and those the plain tag is chosen among (the spec's: the plain
    tag belongs to one platform of the spec, whichever platforms this run builds)."""
    if options.on and not request.platform:
        raise UserError("--on: give the stand-in base's platform with --platform (for example linux/amd64)")
    platforms = list(request.platform) if options.on else platforms_of(spec, request.platform)
    return platforms, tuple(platforms) if options.on else tuple(spec.platforms)


def _say_why_not_answered(ws: Workspace, name: str, asked: RunOptions) -> None:
    """Why the no-op and the file edit did not answer a build that is recorded."""
    if asked.answerable() and not ws.overrides:
        decision = decide(PlanMemo(ws.home), asked.key(ws.root, name), holds(ws.engine()))
        if decision.doc is not None:
            output().say(f"{name}: {decision.describe()}")


def _engine_first(ws: Workspace, request: BuildRequest) -> None:
    """With nothing to reuse, an engine that does not answer is said before seconds of planning and checks."""
    if request.rebuild and not request.builder and request.load:
        why = ws.engine().unreachable()
        if why:
            raise EngineUnavailable(why, hint="start dockerd (see README: set-up) or set DOCKER_HOST")


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


def _recorded(ws: Workspace, name: str, spec: ImageSpec, plan: ImagePlan, outcome: Outcome, request: BuildRequest,
              listed: tuple[str, ...], only_copied: list[str], results: list[ImageRun]) -> list[str]:
    """The image tagged as asked and, when loaded, what a later no-op or file edit answers from
    (added to `results`); its tags."""
    tags, remembered = _tag_as_asked(name, plan, outcome, request, listed, ws.engine())
    if request.load:
        edit = fastedit.record(Store(ws.home), spec, plan, outcome, only_copied)
        results.append(ImageRun(tuple(remembered), outcome.image_id, edit.to_json()))
    return tags


def _tag_as_asked(name: str, plan: ImagePlan, outcome: Outcome, request: BuildRequest,
                  listed: tuple[str, ...], engine: EngineApi) -> tuple[list[str], list[str]]:
    """The image's tags (with -t's, which name the image the plain tag names) and those a later
    no-op or file edit checks and moves (never a -t of this run alone)."""
    tags = local_tags(plan, listed)
    if not request.local_tags or len(tags) < 2:
        return tags, tags
    named = [parse_local_tag(t.replace("{image}", name.replace(":", "-"))) for t in request.local_tags]
    for repository, tag in named:
        engine.tag(outcome.image_id, repository, tag)
    rest = [p for p in listed if p != plan.platform]
    output().say("  tagged " + ", ".join(f"{r}:{t}" for r, t in named)
                 + (f" (the {plan.platform} image only: an engine's tag names one image; the image's "
                    f"other platforms ({', '.join(rest)}) keep their {plan.tags[1]}-ARCH tags, and `push` "
                    "names every platform in one index)" if rest else ""))
    every = tags + [f"{r}:{t}" for r, t in named]
    return every, every if request.tags_follow else tags  # enginebuild.yaml's tags follow every build


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
    if not done and outcome.replaced:  # every layer there: what changed is the configuration
        done.append("only the image's config changed (env, labels, entrypoint...): a new image, no layer made")
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


def executor_for(ws: Workspace, spec: ImageSpec, request: BuildRequest, cache: LayerCache | None,
                 rebuild: bool | None = None) -> Executor:
    return Executor(ws.home, mirrors=ws.mirrors, rebuild=request.rebuild if rebuild is None else rebuild,
                    builder_name=request.buildx_builder, verbose=request.verbose, cache=cache,
                    scanner=Scanner(spec, store=Store(ws.home)), jobs=request.jobs,
                    builders=builders_of(ws, request.builder), engine=ws.engine())


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
        executor = Executor(ws.home, mirrors=ws.mirrors, rebuild=request.rebuild, builder_name=request.buildx_builder,
                            verbose=request.verbose, cache=cache, scanner=Scanner(spec, store=Store(ws.home)),
                            jobs=request.jobs, builders=builders_of(ws, request.builder), engine=ws.engine())
        executor.components(plan, frozenset(request.component))
        executor.fill_cache()
        outcome = executor.outcome
        built = [n[10:] for n in outcome.built if n.startswith("component ")]
        done = [f"built {', '.join(built)}"] if built else []
        done += [f"pulled {len(outcome.pulled)} from the cache"] if outcome.pulled else []
        done += [f"reused {outcome.reused}"] if outcome.reused else []
        report(Built(name, platform, tuple(done), time.monotonic() - start, cache.name if cache else "",
                     components=tuple(request.component)))


def write_outputs(ws: Workspace, plan: ImagePlan, tag: str, outputs: OutputFolders, platform: str | None) -> None:
    """--output: the runtime's filesystem and the components' outputs, into their folders
    (a subfolder per platform when the build made several)."""

    runtime, components = outputs
    sub = platform.replace("/", "_") if platform else ""
    if runtime is not None:
        done = export_runtime(ws.engine(), tag, runtime / sub if sub else runtime)
        output().say(f"  runtime filesystem -> {done}")
    for name, folder in components.items():
        node = next((c for c in plan.components if c.name == name), None)
        if node is None:
            raise UserError(f"--output {name}=…: component {name} is not built for {plan.image}: nothing installs or "
                            "needs it", hint="add it to install:, or to the needs of a component installed")
        record = output_record(Store(ws.home), node.key)
        assert record is not None, f"component {name} was built but has no outputs record"
        done = export_component(Store(ws.home), record, node.outputs.kind, node.outputs.to, folder / sub if sub
                                else folder)
        output().say(f"  component {name} outputs -> {done}")


def run_options(options: Options, platforms: tuple[str, ...]) -> RunOptions:
    """A plan's options as the memo knows them (state/memo.py), for `platforms` (() for the spec's)."""
    return RunOptions(tuple(sorted(options.build_args.items())), options.on, tuple(sorted(options.only)), platforms)
