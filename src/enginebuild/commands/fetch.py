"""Download every pinned input of the images (sdists, wheels, .debs, git commits, URLs) into the
content-addressed store, verifying each against its locked sha256; a damaged stored file is
deleted, named and fetched again. Builds then need no network for these inputs."""

from __future__ import annotations

import argparse

from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="*", metavar="IMAGE", help="images to fetch for (default: all)")
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH", help="only this platform")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.build.fetch import Fetcher, git_wheels, plan_downloads
    from enginebuild.io.store import Store
    from enginebuild.layerkinds.context import FromSource
    from enginebuild.plan.image import plan_image
    from enginebuild.sources.base import Context
    from enginebuild.usecases.targets import platforms_of

    ws.sweep()
    for name in ws.select(args.images):
        spec = ws.spec(name)
        lock = ws.lock(spec)
        fetcher = Fetcher(Store(ws.home))
        for platform in platforms_of(spec, args.platform):
            plan = plan_image(spec, lock, platform, ws.plan_options())
            fetcher.all(plan_downloads(plan))
            for pin in git_wheels(plan.runtime):
                fetcher.git_wheel(ws.home, pin)
            for comp in plan.components:
                for item in comp.context:
                    if isinstance(item.origin, FromSource):
                        item.origin.source.tree_tar(Context(ws.home, fetcher.http, plan.epoch))
        print(f"{name}: {len(fetcher.fetched)} fetched, {fetcher.cached} already in the store")
    return 0
