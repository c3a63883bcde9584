"""Show every stage of an image in build order: its key, whether its image already
exists, and for each stage to build, which input changed since its last build."""
from __future__ import annotations

import json


def add_arguments(parser):
    parser.add_argument("image", metavar="IMAGE")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="override an engine build argument")


def describe_plan(ws, name: str, build_args: dict) -> dict:
    from enginebuild.engine_api import EngineAPI
    from enginebuild.executor import stages_to_build
    from enginebuild.history import BuildHistory, changed_inputs
    from enginebuild.stages import STAGE_REPO, plan_image

    plan = plan_image(ws.spec(name), ws.lock(name), build_args=build_args)
    existing = EngineAPI().tags_of(STAGE_REPO)
    todo = {s.key for s in stages_to_build(plan, existing)}
    history = BuildHistory(ws.home).read(plan.image_tag)
    stages = []
    for stage in plan.stages:
        row = {"stage": stage.name, "key": stage.key, "exists": stage.key in existing,
               "action": "build" if stage.key in todo else ("exists" if stage.key in existing else "not needed")}
        if stage.key in todo:
            row["changed"] = changed_inputs(stage, history.get(stage.name))
        stages.append(row)
    return {"image": name, "platform": plan.platform, "base": plan.base_ref, "tag": plan.image_tag,
            "final_key": plan.final.key, "stages": stages, "to_build": [s["stage"] for s in stages if s["action"] == "build"]}


def run(args, ws) -> int:
    from enginebuild.commands.image import parse_build_args

    doc = describe_plan(ws, args.image, parse_build_args(args.build_arg))
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
