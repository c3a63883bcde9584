"""Sign images already in their registry, by digest: each index and platform manifest signed, the
SBOM and provenance the push attached read back and attached again in signed envelopes
(docs/signing.md). For a CI job that signs after the job that pushed; `push --sign` does both."""

from __future__ import annotations

import argparse

from enginebuild.commands.arguments import add_signing_arguments, signer_of
from enginebuild.workspace import Workspace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="+", metavar="REGISTRY/REPO@sha256:...")
    add_signing_arguments(parser, implied=True)


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.usecases.signing import pinned, sign_pushed

    args.sign = True
    for image in args.images:
        pinned(image)  # every reference checked before anything is signed
    signer = signer_of(args)
    assert signer is not None  # --sign is implied
    for image in args.images:
        attached = sign_pushed(image, signer)
        print(f"{image}: signed by {attached['signed-by']}; sbom statement {attached['sbom-statement']}; "
              f"provenance statement {attached['provenance-statement']}")
    return 0
