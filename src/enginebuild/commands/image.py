"""Build images, for every platform they list: components whose inputs changed (independent
ones at the same time), then the runtime's layers (written by enginebuild, or by BuildKit
for commands), then the image itself. With nothing changed, nothing runs."""

from __future__ import annotations

import argparse
import difflib
import re
import time
from collections.abc import Iterable
from typing import Any

from enginebuild.errors import UserError, command
from enginebuild.io import faults
from enginebuild.io.progress import output
from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="*", metavar="IMAGE")
    parser.add_argument("--all", action="store_true",
                        help="every buildable image of the catalogue (those whose lock pins every input here)")
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH",
                        help="build only this platform of the spec (repeatable)")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="override a component build argument (part of its key)")
    locking = parser.add_mutually_exclusive_group()
    locking.add_argument("--locked", action="store_true",
                         help="build only with the lock as it is: exit 1 naming any input the spec asks for that the "
                              "lock does not pin (CI), instead of locking it first")
    locking.add_argument("--frozen", action="store_true",
                         help="as --locked, and never reach a network to resolve anything")
    parser.add_argument("--output", action="append", default=[], metavar="DIR|COMPONENT=DIR",
                        help="also write the runtime's filesystem (DIR), or a component's outputs (COMPONENT=DIR: "
                             "its files as the runtime has them, or its wheels) to a new folder, as Docker's "
                             "--output type=local,dest=DIR; with several platforms, one subfolder each (linux_amd64)")
    add_builder_arguments(parser)
    parser.add_argument("--component", action="append", default=[], metavar="NAME",
                        help="build only this component (repeatable) and what it needs, into the store and the "
                             "cache; no image is assembled (one CI job per component; a last job assembles)")
    parser.add_argument("--jobs", type=int, metavar="N", help="components built at the same time (default: CPUs, max 4)")
    parser.add_argument("--push", action="store_true", help="push after building (needs --to)")
    parser.add_argument("--to", metavar="REPO", help="with --push: REGISTRY/REPO[:TAG]")
    parser.add_argument("--tag", action="append", default=[], help="with --push: tag to push (repeatable)")
    parser.add_argument("--on", metavar="IMAGE@sha256:...",
                        help="build the runtime on this digest-pinned base instead of the locked one (with --stages: "
                             "try a recipe's last layers on a stand-in base); tagged enginebuild/IMAGE:on-<digest>")
    parser.add_argument("--stages", metavar="KIND,...", default=None,
                        help="with --on: which layer kinds to build (system, python, components, overlays, steps, "
                             "files; default: files)")
    add_cache_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="stream the builder's output")


def add_builder_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--builder", action="append", default=[], metavar="[NAME=]ENGINE",
                        help="a Docker engine to build components on (repeatable): unix://, tcp:// (TLS from "
                             "DOCKER_CERT_PATH), ssh://USER@HOST, a Docker context's name, a builder of "
                             "enginebuild.yaml, or `local` (this machine's); default: builders: in enginebuild.yaml, "
                             "else this machine's engine")
    parser.add_argument("--buildx-builder", metavar="NAME",
                        help="the buildx builder this machine's engine builds with (default: $BUILDX_BUILDER)")


def builders_of(ws: Workspace, values: list[str]) -> Any:
    from enginebuild.build.sites import builder_specs
    from enginebuild.spec.repo_settings import load_repo_settings

    return builder_specs(values, load_repo_settings(ws.root).builders)


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache", metavar="REGISTRY/REPO",
                        help="registry-backed cache: take outputs and layers found there, push what is built here "
                             "(default: $ENGINEBUILD_CACHE, or cache.repository in enginebuild.yaml)")
    parser.add_argument("--no-cache", action="store_true", help="ignore any configured cache")
    parser.add_argument("--cache-readonly", action="store_true", help="pull from the cache, never push to it")


def parse_build_args(values: list[str], specs: Iterable[Any] = ()) -> dict[str, str]:
    """NAME=VALUE pairs; with `specs`, each NAME must be a build argument of one of their
    components (an override of nothing would be ignored: a typo is refused, with a guess)."""
    out = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or any(c in text for c in "\n\r\x00"):
            raise UserError(f"--build-arg {value!r}: expected NAME=VALUE on one line")
        out[name] = text
    specs = list(specs)
    known = {key: f"{spec.name}: component {comp.name}" for spec in specs for comp in spec.components
             for key, _ in comp.build.args}
    for name in out:
        if specs and name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            where = ", ".join(sorted(spec.name for spec in specs))
            raise UserError(f"--build-arg {name}: no component of {where} has a build argument {name}",
                            hint=f"did you mean {close[0]} ({known[close[0]]})?" if close else
                            "a component's build.args in the spec names what may be overridden")
    return out


def platforms_of(spec: Any, wanted: list[str]) -> list[str]:
    for platform in wanted:
        if platform not in spec.platforms:
            raise UserError(f"{spec.file}: {spec.name} is built for {', '.join(spec.platforms)}, not {platform}")
    return list(wanted) or list(spec.platforms)


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


def check_stacks_first(ws: Workspace, plan: Any) -> None:
    """A component's patch stack is applied on the host before anything is built, so a patch that
    no longer applies stops the build at once, naming patch, file and hunk."""
    from enginebuild.build.executor import Executor
    from enginebuild.patches.patched import patched_tree
    from enginebuild.plan.model import FromSource
    from enginebuild.sources.base import Context

    executor = Executor(ws.home)
    for comp in plan.components:
        if executor.output_record(comp) is not None:
            continue
        for item in comp.context:
            if isinstance(item.origin, FromSource) and item.origin.patches:
                o = item.origin
                patched_tree(Context(ws.home, executor.http, plan.epoch), comp.name, o.source, o.pin, o.patches,
                             item.digest, plan.image)


def run(args: argparse.Namespace, ws: Workspace) -> int:
    if bool(args.images) == bool(args.all):
        raise UserError("name the images to build, or --all")
    if args.all:
        args.images = [n for n in every_buildable(ws)
                       if not args.platform or set(args.platform) & set(ws.spec(n).platforms)]
    if args.push and not args.to:
        raise UserError("--push needs --to REGISTRY/REPO")
    if not args.push and (args.to or args.tag):
        given = " and ".join(f for f, v in (("--to", args.to), ("--tag", args.tag)) if v)
        raise UserError(f"{given} only take effect with --push, which is not given: nothing would use them",
                        hint="add --push, or push later with `push IMAGE --to REGISTRY/REPO`")
    if args.push and len(set(args.images)) > 1:
        raise UserError(f"--push --to {args.to} with {len(set(args.images))} images would push them all into one "
                        "repository", hint="build them together, then push each to its own repository with `push`")
    if args.component and (args.push or args.on or args.output):
        raise UserError("--component builds components only: it goes with neither --push, --on nor --output")
    if args.platform and args.on and len(args.platform) != 1:
        raise UserError("--on builds one platform: give one --platform")
    for platform in args.platform:
        if not re.fullmatch(r"linux/[a-z0-9]+(?:/v[0-9])?", platform):
            raise UserError(f"--platform {platform!r}: expected os/arch such as linux/amd64")
    on, only = parse_on(args.on, args.stages)

    names = list(dict.fromkeys(args.images))
    build_args = parse_build_args(args.build_arg, [ws.spec(name) for name in names] if args.build_arg else ())
    if args.output:
        from enginebuild.build.export import parse_outputs

        if len(names) != 1 or args.on:
            raise UserError("--output writes what one image build made: name one image (and no --on)")
        args.outputs = parse_outputs(args.output)
        spec = ws.spec(names[0])
        for comp in args.outputs[1]:
            if comp not in {c.name for c in spec.components}:
                close = difflib.get_close_matches(comp, [c.name for c in spec.components], n=1)
                raise UserError(f"--output {comp}=…: {spec.name} has no component {comp!r}",
                                hint=f"did you mean {close[0]!r}?" if close else None)
    options = ws.plan_options(build_args=build_args, on=on, only=only)
    ws.sweep()
    if not on and not ws.overrides:  # a --set value is never written to a lock: the plan refuses it as before
        lock_first(ws, names, args.locked or args.frozen)
    for name in names:
        if args.component:
            build_components(ws, name, args, options)
        else:
            build_one(ws, name, args, options)
    return 0


def build_components(ws: Workspace, name: str, args: argparse.Namespace, options: Any) -> None:
    """--component: those components (and what they need) built or taken from the cache, their
    outputs pushed to it; the image is not assembled."""
    from enginebuild.build.cache import cache_from_settings
    from enginebuild.build.executor import Executor
    from enginebuild.plan.image import plan_image

    ws.select([name], all_when_empty=False)
    spec = ws.spec(name)
    cache = cache_from_settings(ws, args.cache, args.no_cache, args.cache_readonly)
    if cache is None:
        output().say("  note: no cache is configured: the outputs stay in this machine's store")
    for platform in platforms_of(spec, args.platform):
        start = time.monotonic()
        plan = plan_image(spec, ws.lock(spec), platform, options)
        check_stacks_first(ws, plan)
        executor = Executor(ws.home, builder_name=args.buildx_builder, verbose=args.verbose, cache=cache,
                            jobs=args.jobs, builders=builders_of(ws, args.builder))
        executor.components(plan, frozenset(args.component))
        executor.fill_cache()
        outcome = executor.outcome
        built = [n[10:] for n in outcome.built if n.startswith("component ")]
        done = [f"built {', '.join(built)}"] if built else []
        done += [f"pulled {len(outcome.pulled)} from the cache"] if outcome.pulled else []
        done += [f"reused {outcome.reused}"] if outcome.reused else []
        print(f"{name} ({platform}): component(s) {', '.join(args.component)}: {'; '.join(done) or 'nothing to do'} "
              f"in {time.monotonic() - start:.1f}s" + (f", outputs in {cache.name}" if cache else ""))


def lock_first(ws: Workspace, names: list[str], strict: bool) -> None:
    """Inputs the spec asks for and the lock does not pin: locked first (only those), or, with
    --locked/--frozen, refused naming them."""
    from enginebuild.commands.lock import relock
    from enginebuild.errors import LockWouldChange
    from enginebuild.lock.lockfile import input_where, stale_inputs

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
        relock(ws, name)


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


def write_outputs(ws: Workspace, plan: Any, tag: str, outputs: Any, platform: str | None) -> None:
    """--output: the runtime's filesystem and the components' outputs, into their folders
    (a subfolder per platform when the build made several)."""
    from enginebuild.build.export import export_component, export_runtime
    from enginebuild.io.store import Store
    from enginebuild.oci.engine import Engine

    runtime, components = outputs
    sub = platform.replace("/", "_") if platform else ""
    if runtime is not None:
        done = export_runtime(Engine(), tag, runtime / sub if sub else runtime)
        output().say(f"  runtime filesystem -> {done}")
    for name, folder in components.items():
        node = next((c for c in plan.components if c.name == name), None)
        if node is None:
            raise UserError(f"--output {name}=…: component {name} is not built for {plan.image}: nothing installs or "
                            "needs it", hint="add it to install:, or to the needs of a component installed")
        record = Store(ws.home).record("outputs", node.key)
        assert record is not None, f"component {name} was built but has no outputs record"
        done = export_component(Store(ws.home), record, node.outputs.kind, node.outputs.to, folder / sub if sub
                                else folder)
        output().say(f"  component {name} outputs -> {done}")


def build_one(ws: Workspace, name: str, args: argparse.Namespace, options: Any) -> None:
    from enginebuild import fastedit
    from enginebuild.build.cache import cache_from_settings
    from enginebuild.build.executor import local_tags
    from enginebuild.fastpath import DEFAULT_OPTIONS
    from enginebuild.io.store import Store
    from enginebuild.plan.image import plan_image
    from enginebuild.plan.render import TEMPLATES
    from enginebuild.state.memo import PlanMemo, copied_paths, memo_key, other_input_paths

    start = time.monotonic()
    ws.select([name], all_when_empty=False)
    spec = ws.spec(name)
    lock = ws.lock(spec)
    if options.on and not args.platform:
        raise UserError("--on: give the stand-in base's platform with --platform (for example linux/amd64)")
    platforms = list(args.platform) if options.on else platforms_of(spec, args.platform)
    # the plain tag belongs to one platform of the spec, whichever platforms this run builds
    listed = tuple(platforms) if options.on else tuple(spec.platforms)
    copied, others = copied_paths(ws.root, spec), other_input_paths(ws.root, spec, TEMPLATES)
    inputs = PlanMemo.snapshot(copied + others)  # before the plan reads them
    only_copied = sorted({str(p) for p in copied} - {str(p) for p in others})  # what fastedit.py may remake
    cache = cache_from_settings(ws, args.cache, args.no_cache, args.cache_readonly)
    results = []
    for platform in platforms:
        plan = plan_image(spec, lock, platform, options)
        faults.reached("image.planned")
        check_stacks_first(ws, plan)
        outcome = build_platform(ws, spec, plan, args, cache, listed)
        tags = local_tags(plan, listed)
        edit = fastedit.record(Store(ws.home), spec, plan, outcome, only_copied)
        results.append({"tags": tags, "id": outcome.image_id, "edit": edit})
        elapsed = time.monotonic() - start
        done = []
        order = {f"component {c.name}": i for i, c in enumerate(plan.components)}
        components = sorted((n for n in outcome.built if n.startswith("component ")), key=lambda n: order.get(n, 0))
        commands = [n for n in outcome.built if not n.startswith("component ")]
        if components:
            done.append(f"built {len(components)} component(s) ({', '.join(n[10:] for n in components)})")
        if commands:
            done.append(f"ran {len(commands)} command layer(s)")
        if outcome.written:
            done.append(f"wrote {len(outcome.written)} layer(s)")
        if outcome.pulled:
            done.append(f"pulled {len(outcome.pulled)} from the cache")
        what = ", ".join(done) if done else "nothing to build"
        print(f"{name} ({platform}): {what} in {elapsed:.1f}s -> {tags[-1]}")
        for comp_name, size in sorted(outcome.output_sizes.items()):
            if f"component {comp_name}" not in outcome.built:  # a built one said its size as it finished
                output().say(f"  component {comp_name}: outputs {size} bytes")
        if not options.on:
            check_kernels(ws, spec, lock, plan)
        if args.output:
            write_outputs(ws, plan, tags[0], args.outputs, platform if len(platforms) > 1 else None)
    flags = {"build_args": options.build_args, "on": options.on, "only": sorted(options.only),
             "platforms": list(args.platform) or None}
    if {**flags, "platforms": None} == DEFAULT_OPTIONS and not ws.overrides:  # the fast path knows --platform
        PlanMemo(ws.home).store(memo_key(ws.root, name, flags), inputs,
                                {"images": results, "summary": ", ".join(r["tags"][-1] for r in results)},
                                [la[3] for r in results for la in r["edit"]["layers"] if la[3]])
    if args.push:
        from enginebuild.commands.push import push_image

        push_image(ws, name, args.to, args.tag, platforms)


ATTEMPTS = 3


def build_platform(ws: Workspace, spec: Any, plan: Any, args: argparse.Namespace, cache: Any,
                   platforms: tuple[str, ...]) -> Any:
    """Build one platform's plan. A stored file found damaged on the way has been named and
    deleted (see io/store.py); the build then runs again and makes or fetches it anew."""
    from enginebuild.build.executor import Executor
    from enginebuild.build.secretscan import Scanner
    from enginebuild.io.store import BadBlob, Store

    builders = builders_of(ws, args.builder)
    for attempt in range(1, ATTEMPTS + 1):
        executor = Executor(ws.home, builder_name=args.buildx_builder, verbose=args.verbose, cache=cache,
                            scanner=Scanner(spec, store=Store(ws.home)), jobs=args.jobs, builders=builders)
        try:
            return executor.build(plan, platforms)
        except BadBlob as exc:
            if attempt == ATTEMPTS:
                raise
            output().say(f"  warning: {exc.message}; building again without it")
    raise AssertionError("unreachable")


def check_kernels(ws: Workspace, spec: Any, lock: Any, plan: Any) -> None:
    """An image that declares cuda-archs is verified as soon as it is built (see `verify`)."""
    from enginebuild.errors import BuildFailed
    from enginebuild.io.store import Store
    from enginebuild.kernels.image import declared_of, verify_plan

    if not declared_of(spec):
        return
    verdict = verify_plan(spec, lock, plan, Store(ws.home))
    lines = verdict.lines()
    if verdict.ok:
        output().say("  kernels: " + lines[-1])
        return
    raise BuildFailed("the kernel architecture check failed:\n    " + "\n    ".join(lines),
                      hint=f"the image is built and tagged; it lacks kernels for what it declares "
                           f"(`{command()} verify {spec.name} --json` lists every binary)")
