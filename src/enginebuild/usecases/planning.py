"""What `plan` shows, the use case behind it: each image's plan described per platform (what
exists, what would be built and where), planned with the lock as it would be after `lock`
(never written) or with none (`--unpinned`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from enginebuild.errors import LockWouldChange, command
from enginebuild.execution.sites import HOST_PLATFORM, LOCAL, BuilderSpec, Site, assign, connect
from enginebuild.execution.status import describe
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.lock.inputs import image_inputs
from enginebuild.lock.lockfile import Lock, input_where, stale_inputs
from enginebuild.oci.engine import EngineUnavailable, holds
from enginebuild.plan.image import plan_image
from enginebuild.state.decision import decide
from enginebuild.state.history import BuildHistory
from enginebuild.state.memo import PlanMemo, RunOptions
from enginebuild.usecases.targets import platforms_of
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.execution.sites import BuilderSpec
    from enginebuild.lock.lockfile import Lock
    from enginebuild.oci.engine import EngineApi
    from enginebuild.plan.model import ImagePlan
    from enginebuild.registrycache.cache import LayerCache
    from enginebuild.wire import JsonDoc


def as_it_would_be(ws: Workspace, name: str, locked: bool) -> tuple[Lock, list[str]]:
    """The lock as the plan reads it, never written: the committed one less the inputs whose
    entries no longer match the spec (shown as what `lock` would change, and planned as not
    pinned); with --locked/--frozen such a difference is an error, as `image` makes it."""

    spec = ws.spec(name)
    lock = ws.lock(spec)
    stale = stale_inputs(spec, lock)
    if not stale:
        assert lock is not None
        return lock, []
    said = "; ".join(f"{inp}: {why}" for inp, why in stale)
    if locked:
        raise LockWouldChange(f"{input_where(spec, stale[0][0])}: {name}: the lock would change: {said}",
                              hint=f"run `{command()} lock {name}` and commit lockfiles/{spec.lock_name}.lock")
    output().say(f"  {name}: `{command()} lock {name}` would change the lock: {said} (plan writes nothing)")
    gone = {inp for inp, _ in stale} if lock is not None else {inp.name for inp in image_inputs(spec)}
    kept = {n: e for n, e in (lock.entries if lock else {}).items() if n not in gone}
    wanted = {inp.name for inp in image_inputs(spec)}  # an entry the spec no longer asks for blocks nothing
    return Lock(spec.name, lock.created if lock else "1970-01-01T00:00:01Z", kept), sorted(gone & wanted)


def unpinned(ws: Workspace, name: str) -> tuple[Lock, list[str]]:
    """No lock at all: every input of the spec planned as requested, none pinned."""

    spec = ws.spec(name)
    return Lock(spec.name, "1970-01-01T00:00:01Z"), sorted(inp.name for inp in image_inputs(spec))


def describe_image(ws: Workspace, name: str, build_args: dict[str, str], platforms: list[str],
                   cache: LayerCache | None, builders: list[BuilderSpec] | None = None,
                   planned: tuple[Lock, list[str]] | None = None) -> list[JsonDoc]:
    """`planned`: the lock to plan with and the inputs it leaves unpinned (see as_it_would_be)."""

    spec = ws.spec(name)
    lock, stale = planned if planned else (ws.lock(spec), [])
    unresolved = sorted(set(lock.blocked()) | set(stale)) if lock else []
    out = []
    engine = ws.engine()
    decision = image_decision(ws, name, build_args, platforms, engine)
    for platform in platforms_of(spec, platforms):
        plan = plan_image(spec, lock, platform, ws.plan_options(build_args=build_args, strict=not unresolved))
        doc = describe(plan, ws.home, cache, {plan.tag: image_id(engine, plan.tag)}, ws.mirrors)
        doc["buildable"] = not unresolved
        doc["unresolved"] = unresolved
        doc["unused_components"] = list(plan.unused)
        doc["decision"] = decision
        if builders is not None and doc["components_to_build"]:
            show_assignment(ws, plan, doc, builders)
        out.append(doc)
    return out


def image_decision(ws: Workspace, name: str, build_args: dict[str, str], platforms: list[str], engine: EngineApi) -> str:
    """What `image` with these options would answer now, and why (state/decision.py, the one decision)."""

    if ws.overrides:
        return "rebuild: a run with --set values is built with a lock of its own, never answered from a record"
    asked = RunOptions(build_args=tuple(sorted(build_args.items())), platforms=tuple(platforms))
    found = decide(PlanMemo(ws.home), asked.key(ws.root, name), holds(engine))
    return found.describe()


def image_id(engine: EngineApi, tag: str) -> str:
    """The engine's image for a tag; "" when it has none, or when no engine answers (a plan needs none)."""

    try:
        return engine.image_id(tag) or ""
    except EngineUnavailable:
        return ""


def show_assignment(ws: Workspace, plan: ImagePlan, doc: JsonDoc, specs: list[BuilderSpec]) -> None:
    """Which builder would build each component to build (the builders are asked what they are)."""

    store, history, engine = Store(ws.home), BuildHistory(ws.home), ws.engine()
    local = Site(BuilderSpec(LOCAL, engine.endpoint), engine, (HOST_PLATFORM,), store)
    sites = connect(specs, store, local=local)
    doc["builders"] = [{"name": s.name, "engine": s.spec.endpoint.describe(), "platforms": list(s.platforms)}
                       for s in sites]
    todo = [c for c in plan.components if c.name in doc["components_to_build"]]
    chosen = assign([(c.name, history.seconds(f"component {c.name}") or 1.0) for c in todo], plan.platform, sites)
    for row in doc["components"]:
        if row["name"] in chosen:
            row["builder"] = chosen[row["name"]].name
