"""Build images: resolve the plan from spec and lock, fetch what is missing, and build
with BuildKit only the stages whose inputs changed. With nothing changed, no builder runs."""
from __future__ import annotations

import re
import sys
import time

from enginebuild.errors import UserError


def add_arguments(parser):
    parser.add_argument("images", nargs="+", metavar="IMAGE")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="override an engine build argument (part of the stage key)")
    parser.add_argument("--builder", metavar="NAME", help="buildx builder to use (default: $BUILDX_BUILDER)")
    parser.add_argument("--push", action="store_true", help="push after building (needs --to)")
    parser.add_argument("--to", metavar="REPO", help="with --push: registry repository, REGISTRY/REPO[:TAG]")
    parser.add_argument("--tag", action="append", default=[], help="with --push: tag to push (repeatable)")
    parser.add_argument("--on", metavar="IMAGE@sha256:...",
                        help="build on this digest-pinned base instead of the locked one (with --stages: try a "
                             "recipe's last stages on a stand-in base); tagged enginebuild/IMAGE:on-<digest>")
    parser.add_argument("--platform", metavar="OS/ARCH",
                        help="with --on: build for this platform instead of the spec's (a stand-in base's own)")
    parser.add_argument("--stages", metavar="KIND,...", default=None,
                        help="with --on: which stage kinds to build (default: files)")
    add_cache_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="stream the builder's output")


def add_cache_arguments(parser) -> None:
    parser.add_argument("--cache", metavar="REGISTRY/REPO",
                        help="registry-backed stage cache: pull stages found there, push stages built here "
                             "(default: $ENGINEBUILD_CACHE, or cache.repository in enginebuild.yaml)")
    parser.add_argument("--no-cache", action="store_true", help="ignore any configured stage cache")
    parser.add_argument("--cache-readonly", action="store_true", help="pull from the stage cache, never push to it")


def parse_build_args(values) -> dict:
    out = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or any(c in text for c in "\n\r\x00"):
            raise UserError(f"--build-arg {value!r}: expected NAME=VALUE on one line")
        out[name] = text
    return out


def parse_on(on, stages) -> tuple:
    if stages and not on:
        raise UserError("--stages goes with --on")
    if not on:
        return None, None
    from enginebuild.reference import parse_image_ref
    from enginebuild.stages import STAGE_KINDS

    try:
        ref = parse_image_ref(on)
    except ValueError as exc:
        raise UserError(f"--on {on!r}: {exc}") from None
    if not ref.digest:
        raise UserError(f"--on {on!r}: give a digest-pinned reference (REPO@sha256:...); a tag could move")
    only = [s.strip() for s in (stages or "files").split(",") if s.strip()]
    unknown = [s for s in only if s not in STAGE_KINDS]
    if unknown:
        raise UserError(f"--stages: unknown stage kind(s) {', '.join(unknown)}; known: {', '.join(STAGE_KINDS)}")
    if "files" not in only:
        only.append("files")
    return ref.with_digest(ref.digest), only


def check_patches_before_build(ws, spec, lock, stages) -> None:
    """A source build's patch stack is checked on the host before any stage is built, so a
    patch that no longer applies stops the build at once, naming patch, file and hunk. (An
    overlay's installed tree is only known inside the image: its patch stage is the check.)"""
    if "patches" not in stages or spec.engine is None or spec.engine.overlay:
        return
    from enginebuild.errors import BuildFailed
    from enginebuild.patches.check import check_stack
    from enginebuild.patches.targets import stack_targets

    for target in stack_targets(ws.home, spec, lock):
        if target.component != spec.engine.name or target.tree is None:
            continue
        for result in check_stack(target.patches, target.tree, is_ancestor=target.is_ancestor):
            if result.conflict is not None:
                raise BuildFailed(f"stage patches: patch {result.name} does not apply to {target.component} "
                                  f"{target.tree.description} ({result.status}): {result.detail}",
                                  hint=f"`python BUILD.py patches check {spec.name}` shows what the source has instead")
            if result.status != "applies":
                print(f"  warning: {result.name}: {result.detail}", file=sys.stderr)


def run(args, ws) -> int:
    if args.push and not args.to:
        raise UserError("--push needs --to REGISTRY/REPO")
    on, only = parse_on(args.on, args.stages)
    if args.platform and not on:
        raise UserError("--platform goes with --on (a spec's platform is part of what it pins)")
    if args.platform and not re.fullmatch(r"linux/[a-z0-9]+(?:/v[0-9])?", args.platform):
        raise UserError(f"--platform {args.platform!r}: expected os/arch such as linux/amd64")
    build_args = parse_build_args(args.build_arg)
    options = {"build_args": build_args, "on": on, "only": only, "platform": args.platform}
    for name in list(dict.fromkeys(args.images)):
        build_one(ws, name, args, options, time.monotonic())
    return 0


def build_one(ws, name: str, args, options: dict, start: float) -> None:
    from enginebuild.executor import execute
    from enginebuild.fetch import Fetcher
    from enginebuild.memo import PlanMemo, memo_key, plan_input_paths
    from enginebuild.render import templates_dir
    from enginebuild.stages import plan_image

    spec = ws.select([name], all_when_empty=False) and ws.spec(name)
    lock = ws.lock(name)
    plan = plan_image(spec, lock, build_args=options["build_args"], on=options["on"], only=options["only"],
                      platform=options["platform"])
    from enginebuild.stagecache import cache_from_settings

    cache = cache_from_settings(ws, args.cache, args.no_cache, args.cache_readonly)
    outcome = execute(plan, Fetcher(ws.home, lock), ws.home, builder_name=args.builder, verbose=args.verbose,
                      preflight=lambda stages: check_patches_before_build(ws, spec, lock, stages), cache=cache)
    elapsed = time.monotonic() - start
    pulled = f", pulled {', '.join(outcome.pulled)} from the cache" if outcome.pulled else ""
    if outcome.built:
        print(f"{name}: built {len(outcome.built)} of {len(plan.stages)} stages "
              f"({', '.join(outcome.built)}){pulled} in {elapsed:.1f}s -> {plan.image_tag}")
    elif outcome.pulled:
        print(f"{name}: nothing to build{pulled} in {elapsed:.1f}s -> {plan.image_tag}")
    else:
        print(f"{name}: all {len(plan.stages)} stages exist; nothing to build "
              f"({elapsed * 1000:.0f} ms) -> {plan.image_tag}")
    print(f"  final stage {plan.final.key}", file=sys.stderr)
    PlanMemo(ws.home).store(memo_key(ws.root, name, options), plan_input_paths(ws.root, spec, templates_dir()),
                            {"final_tag": plan.final.tag, "image_tag": plan.image_tag, "stages": len(plan.stages)})
    if args.push:
        from enginebuild.commands.push import push_image
        push_image(ws, name, plan, args.to, args.tag)
