"""Check this machine for what enginebuild needs, each with a fix: the docker client and
engine, a BuildKit path (buildx, or a client before 23.0), emulation for every platform the
catalogue targets, uv and git, the registries this checkout uses (the cache, past push
targets, any --registry) with their credentials (never printed), and free disk for the store
and the engine against the largest image built here; every builder named (answers, native
platforms). Exit 1 when something is missing."""

from __future__ import annotations

import argparse
import json

from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--registry", action="append", default=[], metavar="REGISTRY/REPO",
                        help="also check this push target (repeatable)")
    parser.add_argument("--builder", action="append", default=[], metavar="[NAME=]ENGINE",
                        help="also check this builder (repeatable; default: builders: in enginebuild.yaml)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.usecases.diagnosing import as_json, run_checks, table

    checks = run_checks(ws, args.registry, args.builder)
    if args.json:
        print(json.dumps(as_json(checks), indent=2))
    else:
        print("\n".join(table(checks)))
    return 1 if any(c.failed for c in checks) else 0
