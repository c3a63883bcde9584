"""Show, per platform, every component and runtime layer of an image (never writing the lock:
what `lock` would change is said, and planned as not pinned yet): its key, whether it
exists, is written by enginebuild, is built by BuildKit or comes from the cache, and for
what must be made, which input changed since its last build."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from enginebuild.io.progress import human_bytes
from enginebuild.plan.routes import Route
from enginebuild.wire import JsonDoc
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.build.cache import LayerCache
    from enginebuild.build.sites import BuilderSpec
    from enginebuild.lock.lockfile import Lock
    from enginebuild.oci.engine import Engine
    from enginebuild.plan.model import ImagePlan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="*", metavar="IMAGE")
    parser.add_argument("--all", action="store_true", help="every image of the catalogue (with variants)")
    parser.add_argument("--json", action="store_true",
                        help="machine-readable output: {\"images\": [one document per image and platform]}")
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH",
                        help="only this platform (repeatable; default: every platform of the spec)")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="override a component build argument")
    parser.add_argument("--unpinned", action="store_true",
                        help="plan from the spec alone, every input as requested and none pinned (as render has it)")
    from enginebuild.commands.arguments import add_builder_arguments, add_cache_arguments, add_locking_arguments

    add_locking_arguments(parser, "plan")
    add_cache_arguments(parser)
    add_builder_arguments(parser)


def as_it_would_be(ws: Workspace, name: str, locked: bool) -> tuple[Lock, list[str]]:
    """The lock as the plan reads it, never written: the committed one less the inputs whose
    entries no longer match the spec (shown as what `lock` would change, and planned as not
    pinned); with --locked/--frozen such a difference is an error, as `image` makes it."""
    from enginebuild.errors import LockWouldChange, command
    from enginebuild.io.progress import output
    from enginebuild.lock.inputs import image_inputs
    from enginebuild.lock.lockfile import Lock, input_where, stale_inputs

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
    from enginebuild.lock.inputs import image_inputs
    from enginebuild.lock.lockfile import Lock

    spec = ws.spec(name)
    return Lock(spec.name, "1970-01-01T00:00:01Z"), sorted(inp.name for inp in image_inputs(spec))


def describe_image(ws: Workspace, name: str, build_args: dict[str, str], platforms: list[str],
                   cache: LayerCache | None, builders: list[BuilderSpec] | None = None,
                   planned: tuple[Lock, list[str]] | None = None) -> list[JsonDoc]:
    """`planned`: the lock to plan with and the inputs it leaves unpinned (see as_it_would_be)."""
    from enginebuild.build.status import describe
    from enginebuild.oci.engine import Engine
    from enginebuild.plan.image import plan_image
    from enginebuild.usecases.targets import platforms_of

    spec = ws.spec(name)
    lock, stale = planned if planned else (ws.lock(spec), [])
    unresolved = sorted(set(lock.blocked()) | set(stale)) if lock else []
    out = []
    engine = Engine()
    for platform in platforms_of(spec, platforms):
        plan = plan_image(spec, lock, platform, ws.plan_options(build_args=build_args, strict=not unresolved))
        doc = describe(plan, ws.home, cache, {plan.tag: image_id(engine, plan.tag)})
        doc["buildable"] = not unresolved
        doc["unresolved"] = unresolved
        doc["unused_components"] = list(plan.unused)
        if builders is not None and doc["components_to_build"]:
            show_assignment(ws, plan, doc, builders)
        out.append(doc)
    return out


def image_id(engine: Engine, tag: str) -> str:
    """The engine's image for a tag; "" when it has none, or when no engine answers (a plan needs none)."""
    from enginebuild.oci.engine import EngineUnavailable

    try:
        return engine.image_id(tag) or ""
    except EngineUnavailable:
        return ""


def show_assignment(ws: Workspace, plan: ImagePlan, doc: JsonDoc, specs: list[BuilderSpec]) -> None:
    """Which builder would build each component to build (the builders are asked what they are)."""
    from enginebuild.build.sites import HOST_PLATFORM, LOCAL, BuilderSpec, Site, assign, connect
    from enginebuild.io.store import Store
    from enginebuild.oci.engine import Engine
    from enginebuild.state.history import BuildHistory

    store, history, engine = Store(ws.home), BuildHistory(ws.home), Engine()
    local = Site(BuilderSpec(LOCAL, engine.endpoint), engine, (HOST_PLATFORM,), store)
    sites = connect(specs, store, local=local)
    doc["builders"] = [{"name": s.name, "engine": s.spec.endpoint.describe(), "platforms": list(s.platforms)}
                       for s in sites]
    todo = [c for c in plan.components if c.name in doc["components_to_build"]]
    chosen = assign([(c.name, history.seconds(f"component {c.name}") or 1.0) for c in todo], plan.platform, sites)
    for row in doc["components"]:
        if row["name"] in chosen:
            row["builder"] = chosen[row["name"]].name


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.build.cache import cache_from_settings
    from enginebuild.commands.arguments import parse_build_args
    from enginebuild.errors import UserError

    if not args.images and not args.all:
        raise UserError("name an image, or --all")
    ws.sweep()  # what killed runs left (partial blobs, staging folders), as every verb that reads the store
    names = ws.select(args.images) if args.images else ws.buildable()
    locks = {name: unpinned(ws, name) for name in names} if args.unpinned else \
        {} if ws.overrides else {name: as_it_would_be(ws, name, args.locked or args.frozen) for name in names}
    cache = cache_from_settings(ws.root, args.cache, args.no_registry_cache, True)
    build_args = parse_build_args(args.build_arg, [ws.spec(name) for name in names] if args.build_arg else ())
    from enginebuild.spec.repo_settings import load_repo_settings
    from enginebuild.usecases.targets import builders_of

    named = args.builder or load_repo_settings(ws.root).builders
    builders = builders_of(ws, args.builder) if named else None
    docs = [doc for name in names for doc in describe_image(ws, name, build_args, args.platform, cache, builders,
                                                             locks.get(name))]
    if args.json:
        print(json.dumps({"images": docs}, indent=2))
        return 0
    for doc in docs:
        print(f"{doc['image']}  ({doc['platform']}, base {doc['base']})")
        for c in doc["components"]:
            size = f"  outputs {human_bytes(c['output_size'])}" if c.get("output_size") else ""
            line = f"  component {c['name']:<18} {c['key'][:12]}  {c['action']}{size}"
            if c.get("builder"):
                line += f"  on builder {c['builder']}"
            if c.get("changed"):
                line += "  <- " + ", ".join(c["changed"])
            print(line)
            for where in c.get("mirrors", []):
                print(f"  {'':28} its source is fetched from the mirror {where}")
            for patch in c.get("outside_declared_inputs", []):
                print(f"  {'':28} {patch} touches none of its declared inputs: not part of its key")
            for route in c.get("patch_routes", []):
                if route["route"] != "outside":
                    print(f"  {'':28} {Route(**route).line(c['name'])}")
        for unused in doc["unused_components"]:
            print(f"  component {unused:<18} {'':12}  not built: nothing installs or needs it")
        width = max([44, *(len(row["name"]) for row in doc["layers"])])  # names whole, keys aligned
        for i, row in enumerate(doc["layers"], 1):
            line = f"  {i:2}. {row['name']:<{width}} {row['key'][:12]}  {row['action']} ({row['by']})"
            if row.get("changed"):
                line += "  <- " + ", ".join(row["changed"])
            print(line)
        if not doc["buildable"]:
            print(f"  not buildable until `lock` resolves: {', '.join(doc['unresolved'])}")
        else:
            todo = len(doc["components_to_build"]) + len(doc["layers_to_build"])
            print(f"  {len(doc['components_to_build'])} component(s) and {len(doc['layers_to_build'])} command "
                  f"layer(s) to build, {len(doc['layers_to_write'])} layer(s) to write" if todo or
                  doc["layers_to_write"] else "  nothing to build")
    return 0
