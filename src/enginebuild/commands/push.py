"""Push a built image to REGISTRY/REPO, print REPO@sha256:..., verify that digest against
the registry, and record tag, digest and time in lockfiles/<image>.pushes.json.
A push that fails records nothing."""
from __future__ import annotations

import re
import sys

from enginebuild.errors import BuildFailed, UserError


def add_arguments(parser):
    parser.add_argument("image", metavar="IMAGE")
    parser.add_argument("--to", required=True, metavar="REPO", help="REGISTRY/REPO[:TAG], e.g. ghcr.io/org/qwen36-dflash")
    parser.add_argument("--tag", action="append", default=[], help="tag to push (repeatable; default: the final stage key)")


def run(args, ws) -> int:
    from enginebuild.stages import plan_image

    plan = plan_image(ws.spec(args.image), ws.lock(args.image))
    push_image(ws, args.image, plan, args.to, args.tag)
    return 0


def split_destination(to: str, tags) -> tuple:
    from enginebuild.reference import parse_image_ref

    if "@" in to:
        raise UserError(f"--to {to!r}: push to a repository or tag, not a digest")
    try:
        ref = parse_image_ref(to)
    except ValueError as exc:
        raise UserError(f"--to {to!r}: {exc}") from None
    explicit_tag = to.rsplit("/", 1)[-1].partition(":")[2]
    tags = list(tags) + ([explicit_tag] if explicit_tag else [])
    for tag in tags:
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag):
            raise UserError(f"invalid tag {tag!r}")
    return ref, tags


def push_image(ws, name: str, plan, to: str, tags) -> list:
    from enginebuild.engine_api import EngineAPI
    from enginebuild.pushing import push_tag

    ref, tags = split_destination(to, tags)
    tags = tags or [plan.final.key[:16]]
    engine = EngineAPI()
    if engine.inspect(plan.final.tag) is None:
        raise BuildFailed(f"{name} is not built at its current inputs (final stage {plan.final.short} is missing)",
                          hint=f"run `python BUILD.py image {name}` first, or `image {name} --push --to {to}`")
    results = []
    with ws.state_lock("push records"):
        for tag in tags:
            result = push_tag(ws, name, plan, engine, ref, tag)
            results.append(result)
            print(f"{ref.name}@{result['digest']}")
            print(f"  {ref.name}:{tag}: {result['layers_pushed']} layer(s) uploaded "
                  f"({result['bytes_pushed']} bytes), {result['layers_existing']} already in the registry",
                  file=sys.stderr)
    return results

