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
    from enginebuild.usecases.fetching import fetch_inputs

    ws.sweep()
    for fetched in fetch_inputs(ws, args.images, args.platform):
        print(f"{fetched.image}: {fetched.fetched} fetched, {fetched.cached} already in the store")
    return 0
