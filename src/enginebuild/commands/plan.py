"""Show every stage of an image in build order: its key, whether its image already
exists, and for each stage to build, which input changed since its last build."""
from __future__ import annotations

import json


def add_arguments(parser):
    parser.add_argument("images", nargs="*", metavar="IMAGE")
    parser.add_argument("--all", action="store_true", help="every image of the catalogue")
    parser.add_argument("--json", action="store_true", help="machine-readable output (a list with --all)")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="override an engine build argument")
    from enginebuild.commands.image import add_cache_arguments
    add_cache_arguments(parser)


def describe_plan(ws, name: str, build_args: dict, cache=None) -> dict:
    from enginebuild.engine_api import EngineAPI
    from enginebuild.executor import stages_to_build
    from enginebuild.history import BuildHistory, changed_inputs
    from enginebuild.stages import STAGE_REPO, plan_image

    lock = ws.lock(name)
    unresolved = sorted(lock.unresolved()) if lock else []
    plan = plan_image(ws.spec(name), lock, build_args=build_args, strict=not unresolved)
    existing = EngineAPI().tags_of(STAGE_REPO)
    in_cache = set()
    if cache is not None and stages_to_build(plan, existing):
        for stage in reversed(plan.stages):  # the stage a build would pull: the last one the cache has
            if stage.key in existing:
                break
            if cache.has(stage.key):
                in_cache.add(stage.key)
                break
    todo = {s.key for s in stages_to_build(plan, existing | in_cache)}
    history = BuildHistory(ws.home).read(plan.image_tag)
    stages = []
    for stage in plan.stages:
        row = {"stage": stage.name, "key": stage.key, "exists": stage.key in existing,
               "action": "build" if stage.key in todo else ("exists" if stage.key in existing else
                                                            "pull from cache" if stage.key in in_cache else "not needed")}
        if stage.key in todo:
            row["changed"] = changed_inputs(stage, history.get(stage.name))
        stages.append(row)
    if unresolved:
        for row in stages:
            row["action"] = "not buildable"
            row.pop("changed", None)
    return {"image": name, "platform": plan.platform, "base": plan.base_ref, "tag": plan.image_tag,
            "buildable": not unresolved, "unresolved": unresolved,
            "final_key": plan.final.key, "stages": stages, "to_build": [s["stage"] for s in stages if s["action"] == "build"],
            "from_cache": [s["stage"] for s in stages if s["action"] == "pull from cache"]}


def run(args, ws) -> int:
    from enginebuild.commands.image import parse_build_args
    from enginebuild.errors import UserError
    from enginebuild.stagecache import cache_from_settings

    if not args.images and not args.all:
        raise UserError("name an image, or --all")
    names = ws.select(args.images) if args.images else ws.buildable()
    cache = cache_from_settings(ws, args.cache, args.no_cache, True)
    docs = [describe_plan(ws, name, parse_build_args(args.build_arg), cache) for name in names]
    if args.json:
        print(json.dumps(docs if args.all or len(docs) > 1 else docs[0], indent=2))
        return 0
    for doc in docs:
        print(f"{doc['image']}  ({doc['platform']}, base {doc['base']})")
        for i, row in enumerate(doc["stages"], 1):
            line = f"  {i}. {row['stage']:<14} {row['key'][:12]}  {row['action']}"
            if row.get("changed"):
                line += "  <- " + ", ".join(row["changed"])
            print(line)
        if not doc["buildable"]:
            print(f"  not buildable until `lock` resolves: {', '.join(doc['unresolved'])}")
        else:
            count = len(doc["to_build"])
            print(f"  {count} stage(s) to build" if count else "  nothing to build")
    return 0
