"""Remove what no image needs any more: stored blobs and records, and the engine's
enginebuild/chain and enginebuild/component tags this store made, that neither the current
plans of the catalogue's images (every platform) nor the last build of each image reach (the
tags another store made on a shared engine are left, and counted). `--dry-run` says
what would go and how many bytes, and removes nothing. With `--cache`, the registry cache's
entries no image needs are deleted too (a push target is never touched)."""

from __future__ import annotations

import argparse
import json

from enginebuild.io.progress import human_bytes
from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")
    parser.add_argument("--json", action="store_true", help="what was (or would be) removed, as JSON")
    parser.add_argument("--cache", nargs="?", const="", metavar="REGISTRY/REPO",
                        help="also delete the registry cache's entries no image needs (the configured cache, or "
                             "this one); a cache others share loses what only their images need")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.io.progress import output
    from enginebuild.usecases.collecting import collect, find_garbage

    ws.sweep()
    garbage = find_garbage(ws)  # the store is this run's alone (cli.main holds it for gc)
    for name in garbage.unplanned:
        output().say(f"  note: {name} cannot be planned here (its lock?): only its last build keeps its blobs")
    in_use = [] if args.dry_run else collect(ws, garbage)
    cache_tags: list[str] = []
    if args.cache is not None:
        from enginebuild.recipe.repo_settings import load_repo_settings
        from enginebuild.settings import settings
        from enginebuild.usecases.collecting import cache_garbage, collect_cache

        repo = args.cache or settings().cache or load_repo_settings(ws.root).cache_repository
        if not repo:
            from enginebuild.errors import UserError

            raise UserError("gc --cache: no registry cache is configured", hint="name one: gc --cache REGISTRY/REPO")
        cache_tags = cache_garbage(ws, repo)
        if not args.dry_run:
            collect_cache(repo, cache_tags)
    engine_bytes = sum(size for ref, size in garbage.tags if ref not in in_use)
    if args.json:
        print(json.dumps({"dry_run": args.dry_run, "blobs": len(garbage.blobs), "blob_bytes": garbage.blob_bytes,
                          "records": len(garbage.records), "store": str(ws.home),
                          "build_locks": [str(p) for p in garbage.build_locks],
                          "engine": garbage.engine or None, "engine_tags": [t for t, _ in garbage.tags],
                          "engine_tags_of_others": garbage.others,
                          "engine_tags_in_use": in_use, "kept_blobs": garbage.kept_blobs,
                          "kept_bytes": garbage.kept_bytes, "cache_entries": cache_tags}, indent=2))
        return 0
    verb = "would remove" if args.dry_run else "removed"
    print(f"store: {verb} {len(garbage.blobs)} blob(s), {human_bytes(garbage.blob_bytes)}, and "
          f"{len(garbage.records)} record(s); kept {garbage.kept_blobs} blob(s), {human_bytes(garbage.kept_bytes)}"
          + (f"; {len(garbage.build_locks)} per-build lock(s) of --set over an older committed lock"
             if garbage.build_locks else ""))
    if not garbage.engine:
        print(f"engine: not reached ({garbage.engine_at}): its enginebuild tags were not looked at")
    else:
        print(f"engine: {verb} {len(garbage.tags) - len(in_use)} enginebuild tag(s) this store ({ws.home}) made "
              f"(images up to {human_bytes(engine_bytes)})"
              + (f"; {len(in_use)} in use by a container, kept" if in_use else "")
              + (f"; left {len(garbage.others)} made by another store or an older enginebuild (`docker image rm` "
                 "removes one)" if garbage.others else ""))
        if args.dry_run:
            for ref, size in garbage.tags:
                print(f"  {ref}  {human_bytes(size)}")
    if args.cache is not None:
        print(f"registry cache: {verb} {len(cache_tags)} entr{'y' if len(cache_tags) == 1 else 'ies'} (the "
              "registry's own garbage collection reclaims their blobs)")
    return 0
