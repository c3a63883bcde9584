"""Options several verbs share, defined once: how a push compresses layers, and the registry cache."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from enginebuild.publish.keyless import KeylessSigner
    from enginebuild.publish.signkeys import Signer


def add_compression_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--compression", choices=["gzip", "gzip-isal", "zstd"], default="gzip",
                        help="how the layers enginebuild made are compressed: gzip (default, zlib level 6), gzip-isal "
                             "(gzip made by ISA-L: ~10x faster, ~14%% larger; every consumer reads both) or zstd "
                             "(Docker 23+, containerd 1.5+); deterministic every way")


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache", metavar="REGISTRY/REPO",
                        help="registry-backed cache: take outputs and layers found there, push what is built here "
                             "(default: $ENGINEBUILD_CACHE, or cache.repository in enginebuild.yaml)")
    parser.add_argument("--no-registry-cache", action="store_true", help="ignore any configured registry cache")
    parser.add_argument("--cache-readonly", action="store_true", help="pull from the cache, never push to it")


def add_signing_arguments(parser: argparse.ArgumentParser, implied: bool = False) -> None:
    if not implied:
        parser.add_argument("--sign", action="store_true",
                            help="sign the pushed image and each platform's manifest (cosign's simple signing, ECDSA "
                                 "P-256), and attach the SBOM and the provenance in signed envelopes (docs/signing.md)")
    parser.add_argument("--key", metavar="FILE",
                        help="with --sign: the PEM private key (default: $ENGINEBUILD_SIGNING_KEY, a path or the PEM "
                             "text); never printed nor recorded")
    parser.add_argument("--keyless", action="store_true",
                        help="with --sign: sign as the job's OIDC identity ($SIGSTORE_ID_TOKEN, or a GitHub Actions "
                             "job's with id-token: write) with a short-lived Fulcio certificate, each signature "
                             "entered in Rekor")
    parser.add_argument("--fulcio", metavar="URL", help="with --keyless: the Fulcio to ask (default the public one)")
    parser.add_argument("--rekor", metavar="URL", help="with --keyless: the Rekor to log in (default the public one)")


def signer_of(args: argparse.Namespace, attach: bool = True) -> Signer | KeylessSigner | None:
    """The signer --sign asks for, read before anything is pushed (a bad key stops the command first)."""
    from enginebuild.errors import UserError

    given = next((f for f, v in (("--key", args.key), ("--keyless", args.keyless), ("--fulcio", args.fulcio),
                                 ("--rekor", args.rekor)) if v), None)
    if given and not args.sign:
        raise UserError(f"{given} only takes effect with --sign, which is not given", hint="add --sign")
    if not args.sign:
        return None
    if not attach:
        raise UserError("--sign with --no-attach: a signed push attaches the signed SBOM and provenance",
                        hint="drop --no-attach")
    if args.keyless:
        if args.key:
            raise UserError("--key and --keyless: sign with a key or with the job's identity, not both")
        from enginebuild.publish.keyless import keyless_signer

        return keyless_signer(args.fulcio, args.rekor)
    if args.fulcio or args.rekor:
        raise UserError("--fulcio and --rekor take effect with --keyless", hint="add --keyless")
    from enginebuild.publish.signkeys import load_signer

    return load_signer(args.key)
