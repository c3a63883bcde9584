"""Download every pinned input of the images (sdists, wheels, .debs, git commits) into
the content-addressed store, verifying each against its locked sha256. Builds need no network after this."""
from __future__ import annotations

import sys


def add_arguments(parser):
    parser.add_argument("images", nargs="*", metavar="IMAGE", help="images to fetch for (default: all)")


def run(args, ws) -> int:
    from enginebuild.fetch import Fetcher
    from enginebuild.stages import plan_image

    for name in ws.select(args.images):
        lock = ws.lock(name)
        plan = plan_image(ws.spec(name), lock)
        fetcher = Fetcher(ws.home, lock)
        counts = {"fetched": 0, "cached": 0}

        def report(what, cached):
            counts["cached" if cached else "fetched"] += 1
            if not cached:
                print(f"  {name}: fetched {what}", file=sys.stderr)

        fetcher.fetch([item for stage in plan.stages for item in stage.context], report=report)
        print(f"{name}: {counts['fetched']} fetched, {counts['cached']} already in the store")
    return 0
