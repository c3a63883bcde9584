"""Show, per platform, every component and runtime layer of an image (never writing the lock:
what `lock` would change is said, and planned as not pinned yet): its key, whether it
exists, is written by enginebuild, is built by BuildKit or comes from the cache, and for
what must be made, which input changed since its last build."""

from __future__ import annotations

import argparse
import json

from enginebuild.io.progress import human_bytes
from enginebuild.plan.routes import Route
from enginebuild.wire import JsonDoc
from enginebuild.workspace import Workspace

NAME_COLUMN = 72  # the widest layer name the table pads the others to


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


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.commands.arguments import parse_build_args
    from enginebuild.errors import UserError
    from enginebuild.registrycache.cache import cache_from_settings
    from enginebuild.usecases.planning import as_it_would_be, describe_image, unpinned

    if not args.images and not args.all:
        raise UserError("name an image, or --all")
    ws.sweep()  # what killed runs left (partial blobs, staging folders), as every verb that reads the store
    names = ws.select(args.images) if args.images else ws.buildable()
    locks = {name: unpinned(ws, name) for name in names} if args.unpinned else \
        {} if ws.overrides else {name: as_it_would_be(ws, name, args.locked or args.frozen) for name in names}
    cache = cache_from_settings(ws.root, args.cache, args.no_registry_cache, True)
    build_args = parse_build_args(args.build_arg, [ws.spec(name) for name in names] if args.build_arg else ())
    from enginebuild.recipe.repo_settings import load_repo_settings
    from enginebuild.usecases.targets import builders_of

    named = args.builder or load_repo_settings(ws.root).builders
    builders = builders_of(ws, args.builder) if named else None
    docs = [doc for name in names for doc in describe_image(ws, name, build_args, args.platform, cache, builders,
                                                             locks.get(name))]
    if args.json:
        print(json.dumps({"images": docs}, indent=2))
        return 0
    for doc in docs:
        _print_doc(doc)
    return 0


def _print_doc(doc: JsonDoc) -> None:
    """One platform's plan, as text."""
    print(f"{doc['image']}  ({doc['platform']}, base {doc['base']})")
    print(f"  image now: {doc['decision']}")
    for c in doc["components"]:
        _print_component(c)
    for unused in doc["unused_components"]:
        print(f"  component {unused:<18} {'':12}  not built: nothing installs or needs it")
    # names whole, keys aligned: a name longer than the column (a group of many wheels) has a line
    # of its own, its key and action under it, so one long name does not pad every row
    width = min(NAME_COLUMN, max([44, *(len(row["name"]) for row in doc["layers"])]))
    for i, row in enumerate(doc["layers"], 1):
        name = row["name"] if len(row["name"]) <= width else f"{row['name']}\n      {'':<{width}}"
        line = f"  {i:2}. {name:<{width}} {row['key'][:12]}  {row['action']} ({row['by']})"
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


def _print_component(c: JsonDoc) -> None:
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
