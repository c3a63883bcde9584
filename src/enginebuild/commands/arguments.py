"""Options several verbs share, defined once: how a push compresses layers, the registry cache,
signing, locking (--locked/--frozen), builders and --build-arg; and `image`'s whole grammar,
which the no-op path parses too (fastpath.py: standard library and errors.py only here)."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from enginebuild.errors import UserError

if TYPE_CHECKING:
    from enginebuild.publish.keyless import KeylessSigner
    from enginebuild.recipe.model import ImageSpec
    from enginebuild.trust.signkeys import Signer


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
    from enginebuild.trust.signkeys import load_signer

    return load_signer(args.key)


def add_locking_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """--locked/--frozen, as Cargo and uv have them: without either, inputs the spec asks for and
    the lock lacks are locked first (only those); with one, the lock is used as it is."""
    locking = parser.add_mutually_exclusive_group()
    locking.add_argument("--locked", action="store_true",
                         help=f"{what} only with the lock as it is: exit 1 naming any input the spec asks for that "
                              "the lock does not pin (CI), instead of locking it first")
    locking.add_argument("--frozen", action="store_true",
                         help="as --locked, and never reach a network to resolve anything")


def add_builder_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--builder", action="append", default=[], metavar="[NAME=]ENGINE",
                        help="a Docker engine to build components on (repeatable): unix://, tcp:// (TLS from "
                             "DOCKER_CERT_PATH), ssh://USER@HOST, a Docker context's name, a builder of "
                             "enginebuild.yaml, or `local` (this machine's); default: builders: in enginebuild.yaml, "
                             "else this machine's engine")
    parser.add_argument("--buildx-builder", metavar="NAME",
                        help="the buildx builder this machine's engine builds with (default: $BUILDX_BUILDER)")


def parse_build_args(values: list[str], specs: Iterable[ImageSpec] = ()) -> dict[str, str]:
    """NAME=VALUE pairs; with `specs`, each NAME must be a build argument of one of their
    components (an override of nothing would be ignored: a typo is refused, with a guess)."""
    out = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or any(c in text for c in "\n\r\x00"):
            raise UserError(f"--build-arg {value!r}: expected NAME=VALUE on one line")
        out[name] = text
    specs = list(specs)
    known = {key: f"{spec.name}: component {comp.name}" for spec in specs for comp in spec.components
             for key, _ in comp.build.args}
    for name in out:
        if specs and name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            where = ", ".join(sorted(spec.name for spec in specs))
            base = re.search(r"BASE|FROM", name.upper()) is not None and not close
            raise UserError(f"--build-arg {name}: no component of {where} has a build argument {name}",
                            hint=f"did you mean {close[0]} ({known[close[0]]})?" if close else
                            "the image's base is its spec's `base`, not a build argument: `--on REF@sha256:…` "
                            "builds this once on a stand-in base, `--set base=REF` changes it for this build"
                            if base else "a component's build.args in the spec names what may be overridden")
    return out


def add_image_arguments(parser: argparse.ArgumentParser) -> None:
    """The grammar of `image`'s arguments, one for both ways a run is answered: the command
    (commands/image.py) and the no-op and file-edit answers before the CLI loads (fastpath.py,
    through `image_parser`), which answer only when no option but those that leave the image as
    built was given."""
    parser.add_argument("images", nargs="*", metavar="IMAGE")
    parser.add_argument("--all", action="store_true",
                        help="every buildable image of the catalogue (those whose lock pins every input here)")
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH",
                        help="build only this platform of the spec (repeatable)")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE",
                        help="override a component build argument (part of its key)")
    add_locking_arguments(parser, "build")
    parser.add_argument("--output", action="append", default=[], metavar="DIR|COMPONENT=DIR",
                        help="also write the runtime's filesystem (DIR), or a component's outputs (COMPONENT=DIR: "
                             "its files as the runtime has them, or its wheels) to a new folder, as Docker's "
                             "--output type=local,dest=DIR; with several platforms, one subfolder each (linux_amd64)")
    add_builder_arguments(parser)
    parser.add_argument("--component", action="append", default=[], metavar="NAME",
                        help="build only this component (repeatable) and what it needs, into the store and the "
                             "cache; no image is assembled (one CI job per component; a last job assembles)")
    parser.add_argument("--jobs", type=int, metavar="N", help="components built at the same time (default: CPUs, max 4)")
    parser.add_argument("--push", action="store_true", help="push after building (needs --to)")
    parser.add_argument("--to", metavar="REPO", help="with --push: REGISTRY/REPO[:TAG]")
    parser.add_argument("--push-tag", action="append", default=[], metavar="TAG",
                        help="with --push: a tag to push (repeatable; default: the content tag, and any :TAG of --to)")

    add_compression_argument(parser)
    add_signing_arguments(parser)
    parser.add_argument("--no-load", action="store_true",
                        help="do not load the image into the engine (with --push on a CI runner: the layers go from "
                             "the store to the registry); commands of the image still run on the engine")
    parser.add_argument("-t", "--tag", action="append", default=[], dest="local_tags", metavar="NAME[:TAG]",
                        help="also tag the image NAME[:TAG] in the engine, as `docker build -t` (repeatable; with "
                             "several platforms, the image of the platform this machine runs)")
    parser.add_argument("--on", metavar="IMAGE@sha256:...",
                        help="build the runtime on this digest-pinned base instead of the locked one (with --stages: "
                             "try a recipe's last layers on a stand-in base); tagged enginebuild/IMAGE:on-<digest>")
    parser.add_argument("--stages", metavar="KIND,...", default=None,
                        help="with --on: which layer kinds to build (system, python, components, overlays, steps, "
                             "files; default: files)")
    add_cache_arguments(parser)
    parser.add_argument("--no-cache", action="store_true",
                        help="as `docker build --no-cache`: build every component and command layer again (BuildKit "
                             "without its cache, no stored output or layer reused, the registry cache not read); "
                             "pinned downloads are still reused")
    parser.add_argument("-v", "--verbose", action="store_true", help="stream the builder's output")


def image_parser() -> argparse.ArgumentParser:
    """`image`'s parser alone (the CLI adds it as a verb; the no-op path parses with it)."""
    made = argparse.ArgumentParser(prog="image", add_help=False, exit_on_error=False)
    add_image_arguments(made)
    return made
