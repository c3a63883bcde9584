"""Print the Dockerfile of every stage of an image, in build order; with --out DIR,
write each stage's Dockerfile and its complete build context to DIR/<n>-<stage>/."""
from __future__ import annotations


def add_arguments(parser):
    parser.add_argument("image", metavar="IMAGE")
    parser.add_argument("--out", metavar="DIR", help="write Dockerfiles and build contexts here")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="override an engine build argument")
    parser.add_argument("--unpinned", action="store_true",
                        help="show inputs the lock records as unresolved as requested (to read, not to build)")


def run(args, ws) -> int:
    import tarfile
    from io import BytesIO
    from pathlib import Path

    from enginebuild.commands.image import parse_build_args
    from enginebuild.stages import plan_image

    spec = ws.spec(args.image)
    if args.unpinned and args.out:
        from enginebuild.errors import UserError
        raise UserError("--unpinned renders for reading only; it cannot write build contexts (--out)")
    lock = ws.lock(args.image)
    plan = plan_image(spec, lock, build_args=parse_build_args(args.build_arg), strict=not args.unpinned)
    if not args.out:
        unresolved = lock.unresolved() if lock else {}
        if args.unpinned and unresolved:
            print(f"# NOT BUILDABLE: inputs not pinned in lockfiles/{args.image}.lock: {', '.join(sorted(unresolved))}")
        for i, stage in enumerate(plan.stages, 1):
            print(f"### stage {i}/{len(plan.stages)}: {stage.name}  key {stage.key}")
            print(stage.dockerfile)
        return 0
    from enginebuild.context import write_context
    from enginebuild.fetch import Fetcher

    fetcher = Fetcher(ws.home, ws.lock(args.image))
    fetcher.fetch([item for stage in plan.stages for item in stage.context])
    out = Path(args.out)
    for i, stage in enumerate(plan.stages, 1):
        folder = out / f"{i:02d}-{stage.name}"
        folder.mkdir(parents=True, exist_ok=True)
        buffer = BytesIO()
        write_context(buffer, stage.dockerfile, stage.context, fetcher.materialize)
        buffer.seek(0)
        with tarfile.open(fileobj=buffer) as tar:
            tar.extractall(folder, filter="data")
        print(f"{folder}  {stage.tag}")
    return 0
