"""Push a built image, every platform it was built for, to REGISTRY/REPO: one manifest per
platform and an OCI index tying them together; print REPO@sha256:..., check that digest
against the registry, and record it in lockfiles/<image>.pushes.json. Layers are scanned
for secrets first; an SBOM and a provenance statement are attached (unless --no-attach).
With --sign, the image and each
platform's manifest are signed and the SBOM and provenance attached in signed envelopes
(docs/signing.md). A push that fails records nothing."""

from __future__ import annotations

import argparse

from enginebuild.commands.arguments import add_cache_arguments, add_compression_argument, add_signing_arguments, signer_of
from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", metavar="IMAGE")
    parser.add_argument("--to", required=True, metavar="REPO", help="REGISTRY/REPO[:TAG], e.g. ghcr.io/org/qwen36-dflash")
    parser.add_argument("--tag", action="append", default=[], help="tag to push (repeatable; default: a content tag)")
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH",
                        help="push only these platforms (default: every platform of the spec)")
    parser.add_argument("--no-attach", action="store_true", help="do not attach the SBOM and provenance")
    add_compression_argument(parser)
    add_cache_arguments(parser)
    add_signing_arguments(parser)


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.registrycache.cache import cache_from_settings
    from enginebuild.usecases.pushing import push_image

    signer = signer_of(args, attach=not args.no_attach)
    ws.sweep()  # what killed runs left (partial blobs, staging folders), as every verb that reads the store
    for record in push_image(ws, args.image, args.to, args.tag, args.platform, attach=not args.no_attach, signer=signer,
                             compression=args.compression,
                             cache=cache_from_settings(ws.root, args.cache, args.no_registry_cache, args.cache_readonly)):
        print(f"{record['repository']}@{record['digest']}")
    return 0


