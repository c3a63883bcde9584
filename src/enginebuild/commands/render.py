"""Print the Dockerfiles of an image, per platform: each component's, each command layer's,
and the runtime image as the Dockerfile it is equivalent to. With --out DIR, write each
BuildKit build's Dockerfile and complete context, and the runtime's last part (manifest,
files, settings) as a buildable context (usecases/rendering.py). With --bake DIR, a build plain
`docker buildx bake` runs (usecases/baking.py). --unpinned renders even without a lock."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.lock.lockfile import Lock
    from enginebuild.plan.model import ImagePlan
    from enginebuild.recipe.model import ImageSpec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", metavar="IMAGE")
    parser.add_argument("--out", metavar="DIR", help="write Dockerfiles and build contexts here")
    parser.add_argument("--bake", metavar="DIR",
                        help="write a build plain `docker buildx bake` runs without enginebuild (docker-bake.hcl, "
                             "a multi-stage Dockerfile per platform, the files they read)")
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH", help="only this platform")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="override a component build argument")
    from enginebuild.commands.arguments import add_locking_arguments

    add_locking_arguments(parser, "render")
    parser.add_argument("--unpinned", action="store_true",
                        help="show inputs the lock does not resolve as requested (to read, not to build)")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.commands.arguments import parse_build_args
    from enginebuild.lock.lockfile import Lock
    from enginebuild.plan.image import plan_image
    from enginebuild.usecases.rendering import write_contexts
    from enginebuild.usecases.targets import platforms_of

    _check_options(args)
    if not args.unpinned and not ws.overrides:  # as `image` does: what the lock lacks is locked first
        from enginebuild.usecases.locking import lock_first

        lock_first(ws, [args.image], args.locked or args.frozen)
    spec = ws.spec(args.image)
    lock = ws.lock(spec)
    if lock is None and args.unpinned:
        lock = Lock(spec.name, "1970-01-01T00:00:01Z")
    options = ws.plan_options(build_args=parse_build_args(args.build_arg, [spec]), strict=not args.unpinned)
    if args.bake:
        from enginebuild.usecases.baking import write_bake

        for path in write_bake(ws, [plan_image(spec, lock, p, options) for p in platforms_of(spec, args.platform)],
                               Path(args.bake)):
            print(path)
        return 0
    for platform in platforms_of(spec, args.platform):
        plan = plan_image(spec, lock, platform, options)
        if args.out:
            for line in write_contexts(ws, plan, Path(args.out) / platform.replace("/", "-")):
                print(line)
            continue
        if args.unpinned:
            _print_unpinned(spec, lock, platform)
        _print_dockerfiles(plan, platform)
    return 0


def _check_options(args: argparse.Namespace) -> None:
    from enginebuild.errors import UserError

    if args.unpinned and (args.out or args.bake):
        raise UserError("--unpinned renders for reading only; it cannot write build contexts (--out, --bake)")
    if args.out and args.bake:
        raise UserError("give --out or --bake, not both")
    for flag, value in (("--out", args.out), ("--bake", args.bake)):
        if value and (Path(value).is_symlink() or (Path(value).exists() and not Path(value).is_dir())):
            raise UserError(f"render {flag} {value}: is not a folder", hint="name a folder to write into")


def _print_unpinned(spec: ImageSpec, lock: Lock | None, platform: str) -> None:
    pending = unpinned_inputs(spec, lock, platform)
    if pending:
        print(f"# NOT BUILDABLE: inputs not pinned in lockfiles/{spec.lock_name}.lock; "
              "`lock` resolves them as requested here:")
        for name, request in pending:
            print(f"#   {name}: {request}")


def _print_dockerfiles(plan: ImagePlan, platform: str) -> None:
    """Each component's Dockerfile, each command layer's, then the runtime image's."""
    from enginebuild.plan.views import runtime_dockerfile

    for comp in plan.components:
        print(f"### component {comp.name} ({platform})  key {comp.key}")
        print(comp.dockerfile)
    for node in plan.runtime.layers:
        commands = node.payload.commands()
        if commands is not None:
            print(f"### command layer: {node.name} ({platform})  key {node.chain}")
            print(commands.dockerfile)
    print(f"### runtime image ({platform})")
    print(runtime_dockerfile(plan))


def unpinned_inputs(spec: object, lock: object, platform: str) -> list[tuple[str, str]]:
    """Each input of `platform` (or of every platform) the lock does not pin, as requested."""
    from enginebuild.lock.inputs import image_inputs
    from enginebuild.lock.lockfile import Lock
    from enginebuild.recipe.model import ImageSpec

    assert isinstance(spec, ImageSpec) and isinstance(lock, Lock)
    out = []
    for inp in image_inputs(spec):
        entry = lock.entries.get(inp.name)
        if not inp.serves(platform) or (entry is not None and entry.resolved is not None):
            continue
        out.append((inp.name, inp.describe()))
    return out
