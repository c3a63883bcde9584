"""Show every stage of an image in build order: its key, whether its image already
exists, and for each stage to build, which input changed since its last build."""
from __future__ import annotations

import json


def add_arguments(parser):
    parser.add_argument("image", metavar="IMAGE")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="override an engine build argument")
    from enginebuild.commands.image import add_cache_arguments
    add_cache_arguments(parser)


def describe_plan(ws, name: str, build_args: dict, cache=None) -> dict:
    from enginebuild.engine_api import EngineAPI
    from enginebuild.executor import stages_to_build
    from enginebuild.history import BuildHistory, changed_inputs
    from enginebuild.stages import STAGE_REPO, plan_image

    plan = plan_image(ws.spec(name), ws.lock(name), build_args=build_args)
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
    return {"image": name, "platform": plan.platform, "base": plan.base_ref, "tag": plan.image_tag,
            "final_key": plan.final.key, "stages": stages, "to_build": [s["stage"] for s in stages if s["action"] == "build"],
            "from_cache": [s["stage"] for s in stages if s["action"] == "pull from cache"]}


def run(args, ws) -> int:
    from enginebuild.commands.image import parse_build_args

    from enginebuild.stagecache import cache_from_settings

    cache = cache_from_settings(ws, args.cache, args.no_cache, True)
    doc = describe_plan(ws, args.image, parse_build_args(args.build_arg), cache)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print(f"{doc['image']}  ({doc['platform']}, base {doc['base']})")
    for i, row in enumerate(doc["stages"], 1):
        line = f"  {i}. {row['stage']:<14} {row['key'][:12]}  {row['action']}"
        if row.get("changed"):
            line += "  <- " + ", ".join(row["changed"])
        print(line)
    count = len(doc["to_build"])
    print(f"  {count} stage(s) to build" if count else "  nothing to build")
    return 0
