"""Build images, for every platform they list: components whose inputs changed (independent
ones at the same time), then the runtime's layers (written by enginebuild, or by BuildKit
for commands), then the image itself. With nothing changed, nothing runs."""

from __future__ import annotations

import argparse
import difflib
import re
from typing import TYPE_CHECKING

from enginebuild.commands.arguments import add_image_arguments, parse_build_args, signer_of
from enginebuild.core.platforms import PATTERN, platform_hint
from enginebuild.errors import UserError
from enginebuild.io.progress import output
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from pathlib import Path

    from enginebuild.plan.image import Options as PlanOptions
    from enginebuild.publish.keyless import KeylessSigner
    from enginebuild.trust.signkeys import Signer
    from enginebuild.usecases.buildrequest import BuildRequest, Built


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_image_arguments(parser)  # one grammar with the no-op path (fastpath.py)


def parse_on(on: str | None, stages: str | None) -> tuple[str | None, frozenset[str] | None]:
    from enginebuild.plan.image import LAYER_KINDS

    if stages and not on:
        raise UserError("--stages goes with --on")
    if not on:
        return None, None
    from enginebuild.oci.reference import parse_image_ref

    try:
        ref = parse_image_ref(on)
    except ValueError as exc:
        raise UserError(f"--on {on!r}: {exc}") from None
    if not ref.digest:
        raise UserError(f"--on {on!r}: give a digest-pinned reference (REPO@sha256:...); a tag could move")
    only = {s.strip() for s in (stages or "files").split(",") if s.strip()}
    unknown = sorted(only - set(LAYER_KINDS))
    if unknown:
        raise UserError(f"--stages: unknown kind(s) {', '.join(unknown)}; known: {', '.join(LAYER_KINDS)}")
    return ref.with_digest(ref.digest), frozenset(only | {"files"})


def run(args: argparse.Namespace, ws: Workspace) -> int:
    if bool(args.images) == bool(args.all):
        raise UserError("name the images to build, or --all")
    if args.all:
        args.images = [n for n in every_buildable(ws)
                       if not args.platform or set(args.platform) & set(ws.spec(n).platforms)]
    _check_options(args)
    signer = signer_of(args)
    tag_names = _local_tags(args, ws)
    on, only = parse_on(args.on, args.stages)
    names = list(dict.fromkeys(args.images))
    build_args = parse_build_args(args.build_arg, [ws.spec(name) for name in names] if args.build_arg else ())
    outputs = _outputs(args, ws, names)
    from enginebuild.usecases.buildrequest import BuildRequest
    from enginebuild.usecases.locking import lock_first
    from enginebuild.usecases.targets import builders_of

    builders_of(ws, list(args.builder))  # every builder's address read before any work: a bad one is named

    options = ws.plan_options(build_args=build_args, on=on, only=only)
    request = BuildRequest(platform=list(args.platform), builder=list(args.builder), buildx_builder=args.buildx_builder,
                           verbose=args.verbose, jobs=args.jobs, cache=args.cache, no_cache=args.no_registry_cache or args.no_cache,
                           rebuild=args.no_cache,
                           cache_readonly=args.cache_readonly, outputs=outputs, component=list(args.component),
                           push=args.push, to=args.to, tag=list(args.push_tag), local_tags=tag_names,
                           tags_follow=not args.local_tags, load=not args.no_load,
                           locked=args.locked or args.frozen)
    ws.sweep()
    if not on and not ws.overrides:  # a --set value is never written to a lock: it gets a per-build lock
        lock_first(ws, names, args.locked or args.frozen)
    elif ws.overrides and (args.locked or args.frozen):
        refuse_per_build_lock(ws, names, "--frozen" if args.frozen else "--locked")
    for name in names:
        _build(ws, name, request, options, args.compression, signer)
    return 0


def _check_options(args: argparse.Namespace) -> None:
    """Options that do not go together, each refused with why, before any work."""
    if args.push and not args.to:
        raise UserError("--push needs --to REGISTRY/REPO")
    if not args.push and (args.to or args.push_tag or args.compression != "gzip"):
        given = " and ".join(f for f, v in (("--to", args.to), ("--push-tag", args.push_tag),
                                            ("--compression", args.compression != "gzip")) if v)
        raise UserError(f"{given} only take effect with --push, which is not given: nothing would use them",
                        hint="add --push, or push later with `push IMAGE --to REGISTRY/REPO`")
    if args.push and len(set(args.images)) > 1:
        raise UserError(f"--push --to {args.to} with {len(set(args.images))} images would push them all into one "
                        "repository", hint="build them together, then push each to its own repository with `push`")
    if args.component and (args.push or args.on or args.output or args.local_tags):
        raise UserError("--component builds components only: it goes with neither --push, --on, --output nor -t")
    if args.no_load and (args.local_tags or args.output or args.component):
        given = next(f for f, v in (("-t", args.local_tags), ("--output", args.output),
                                    ("--component", args.component)) if v)
        raise UserError(f"--no-load with {given}: {given} needs the image in the engine",
                        hint=f"drop --no-load, or {given}")
    if args.local_tags and len(set(args.images)) > 1:
        raise UserError(f"-t {args.local_tags[0]} with {len(set(args.images))} images would give them all one name",
                        hint="build them one at a time with -t, or tag them afterwards with `docker tag`")
    if (args.sign or args.key) and not args.push:
        raise UserError("--sign and --key only take effect with --push, which is not given", hint="add --push --to REPO")
    if args.platform and args.on and len(args.platform) != 1:
        raise UserError("--on builds one platform: give one --platform")
    for platform in args.platform:
        if not re.fullmatch(PATTERN, platform):
            raise UserError(f"--platform {platform!r}: expected a platform such as linux/amd64",
                            hint=platform_hint(platform))


def _local_tags(args: argparse.Namespace, ws: Workspace) -> list[str]:
    """-t, else enginebuild.yaml's tags, each checked as a name."""
    from enginebuild.recipe.repo_settings import load_repo_settings
    from enginebuild.usecases.targets import parse_local_tag

    tag_names = list(args.local_tags) or list(load_repo_settings(ws.root).tags)
    for value in tag_names:
        parse_local_tag(value.replace("{image}", args.images[0] if args.images else "x"))
    return tag_names


def _outputs(args: argparse.Namespace, ws: Workspace,
             names: list[str]) -> tuple[Path | None, dict[str, Path]] | None:
    """--output's destinations, each component named checked against the image's."""
    if not args.output:
        return None
    from enginebuild.execution.export import parse_outputs

    if len(names) != 1 or args.on:
        raise UserError("--output writes what one image build made: name one image (and no --on)")
    outputs = parse_outputs(args.output)
    spec = ws.spec(names[0])
    for comp in outputs[1]:
        if comp not in {c.name for c in spec.components}:
            close = difflib.get_close_matches(comp, [c.name for c in spec.components], n=1)
            raise UserError(f"--output {comp}=…: {spec.name} has no component {comp!r}",
                            hint=f"did you mean {close[0]!r}?" if close else None)
    return outputs


def _build(ws: Workspace, name: str, request: BuildRequest, options: PlanOptions, compression: str,
           signer: Signer | KeylessSigner | None) -> None:
    """One image (or its components), then its push when asked, each record's reference printed."""
    from enginebuild.usecases.building import build_image
    from enginebuild.usecases.componentbuild import build_components

    if request.component:
        build_components(ws, name, request, options, say_built)
        return
    built = build_image(ws, name, request, options, say_built)
    if request.push and request.to:
        from enginebuild.registrycache.cache import cache_from_settings
        from enginebuild.usecases.pushing import push_image

        cache = cache_from_settings(ws.root, request.cache, request.no_cache, request.cache_readonly)
        for record in push_image(ws, name, request.to, request.tag, request.platform, plans=built,
                                 options=options, compression=compression, cache=cache, signer=signer):
            print(f"{record['repository']}@{record['digest']}")


def say_built(built: Built) -> None:
    """A platform's line on stdout, as soon as it is built: what was done, in how long, and the
    tag (or image ID) it answers to; for --component, where the outputs went."""
    if built.components:
        print(f"{built.name} ({built.platform}): component(s) {', '.join(built.components)}: "
              f"{'; '.join(built.done) or 'nothing to do'} in {built.seconds:.1f}s"
              + (f", outputs in {built.result}" if built.result else ""))
        return
    print(f"{built.name} ({built.platform}): {', '.join(built.done) or 'nothing to build'} in {built.seconds:.1f}s "
          f"-> {built.result}")


def refuse_per_build_lock(ws: Workspace, names: list[str], flag: str) -> None:
    """--locked/--frozen with a --set that changes a pinned input: nothing may be resolved."""
    from enginebuild.errors import LockWouldChange
    from enginebuild.lock.lockfile import input_where, read_lock, stale_inputs

    for name in names:
        spec = ws.spec(name)
        stale = stale_inputs(spec, read_lock(ws.root, spec))
        if stale:
            raise LockWouldChange(f"{input_where(spec, stale[0][0])}: {name}: --set changes "
                                  f"{', '.join(inp for inp, _ in stale)}, which {flag} will not resolve",
                                  hint=f"drop {flag} to build it with a lock of its own, or drop the --set")


def every_buildable(ws: Workspace) -> list[str]:
    """`--all`: every image and variant whose lock pins every input, each other one named."""
    names = []
    for name in ws.buildable():
        lock = ws.lock(ws.spec(name))
        blocked = lock.blocked() if lock is not None else {"lock": "no lockfile"}
        if blocked:
            first, why = next(iter(blocked.items()))
            output().say(f"{name}: skipped, not buildable here ({first}: {why})")
            continue
        names.append(name)
    return names


