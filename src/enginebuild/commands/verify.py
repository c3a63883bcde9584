"""Check a built image's binaries. Its runtime closure: every executable and shared library
enginebuild put in it has each library it needs inside the image, found as the image's own
loader would (kernels/closure.py). Its kernel architectures, when the spec declares
`cuda-archs`: every CUDA binary must carry device code for each (`12.1a` needs `sm_121a` SASS;
PTX counts with `cuda-verify.jit`), read with the pinned cuobjdump. Read on the host: no GPU,
no emulation, both platforms. Exit 1 naming each binary that fails, and what it lacks.

With --signature, each IMAGE is a pushed REGISTRY/REPO@sha256:... instead, checked from its
registry alone: its bytes, its signature and its signed SBOM and provenance (docs/signing.md)."""

from __future__ import annotations

import argparse
import json
from typing import Protocol

from enginebuild.wire import JsonDoc
from enginebuild.workspace import Workspace


class Report(Protocol):
    """What each check of an image gives: whether it passed, its lines, its JSON."""

    @property
    def ok(self) -> bool: ...

    def lines(self) -> list[str]: ...

    def to_json(self) -> JsonDoc: ...


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("images", nargs="+", metavar="IMAGE")
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH",
                        help="only this platform of the spec (repeatable)")
    parser.add_argument("--json", action="store_true", help="one JSON document: per image and platform, per file")
    parser.add_argument("--signature", action="store_true",
                        help="check pushed images REGISTRY/REPO@sha256:... instead: every byte against its digest, "
                             "the signature, the signed SBOM and provenance; reaches the registry alone")
    parser.add_argument("--key", metavar="PUB.PEM", help="with --signature: the public key that must have signed")
    parser.add_argument("--layers", action="store_true",
                        help="with --signature: also fetch and hash every layer (by default the manifests and "
                             "configs are, and each layer is taken as the signed manifest pins it)")
    parser.add_argument("--identity", metavar="ID",
                        help="with --signature, keyless: the signer's identity (its certificate's subject alternative "
                             "name, e.g. https://github.com/OWNER/REPO/.github/workflows/images.yml@refs/heads/main)")
    parser.add_argument("--issuer", metavar="URL",
                        help="with --signature, keyless: the OIDC issuer (https://token.actions.githubusercontent.com)")
    parser.add_argument("--trusted-root", metavar="FILE",
                        help="with --identity: Sigstore's trusted_root.json (CAs and log keys), read offline")
    parser.add_argument("--archs", metavar="LIST", type=_archs, default=(),
                        help="hold the built image to these architectures (comma-separated, such as 12.1a) instead "
                             "of its cuda-archs: what another GPU needs of it, nothing rebuilt")


def _archs(text: str) -> tuple[str, ...]:
    from enginebuild.kernels.archs import parse_declared

    archs = tuple(a.strip() for a in text.split(",") if a.strip())
    for arch in archs:
        try:
            parse_declared(arch)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if not archs:
        raise argparse.ArgumentTypeError("expected architectures such as 12.1a or 12.0,12.1a")
    return archs


def run(args: argparse.Namespace, ws: Workspace) -> int:
    if args.signature or args.key or args.identity or args.issuer or args.trusted_root or args.layers:
        return _signatures(args)
    from enginebuild.usecases.verifying import verify_images

    def say(lines: list[str]) -> None:
        if not args.json:
            print("\n".join(lines))

    reports: dict[str, list[Report]] = {"images": [], "runtime": [], "imports": [], "patch_checks": [],
                                     "patched_files": []}
    undeclared: list[str] = []
    serving: list[str] = []
    bytecode: list[str] = []
    for found in verify_images(ws, args.images, args.platform, args.archs):
        for key, report in (("runtime", found.closure), ("imports", found.imports), ("patch_checks", found.behaviour),
                            ("patched_files", found.patched)):
            if report is not None:
                reports[key].append(report)
                say(report.lines())
        if found.serving:
            serving.append(found.serving)
            say([found.serving])
        if found.bytecode:
            bytecode.append(found.bytecode)
            say([found.bytecode])
        if found.verdict is not None:
            reports["images"].append(found.verdict)
            say(found.verdict.lines())
        elif found.closure.image not in undeclared:  # nothing is asked of its kernels: not a failure
            undeclared.append(found.closure.image)
            say([f"{found.closure.image}: declares no cuda-archs: kernels not checked (add `cuda-archs: [12.1a]` "
                 "to have its CUDA binaries checked)"])
    ok = all(report.ok for found in reports.values() for report in found)
    if args.json:
        print(json.dumps({"ok": ok, **{key: [r.to_json() for r in found] for key, found in reports.items()},
                          "not_declared": undeclared, "serving": serving, "bytecode": bytecode}, indent=2))
    return 0 if ok else 1


def _signatures(args: argparse.Namespace) -> int:
    from enginebuild.errors import UserError
    from enginebuild.usecases.signing import verify_signatures

    given = next(f for f, v in (("--key", args.key), ("--identity", args.identity), ("--issuer", args.issuer),
                                 ("--trusted-root", args.trusted_root), ("--layers", args.layers),
                                 ("--signature", True)) if v)
    if not args.signature:
        raise UserError(f"{given} only takes effect with --signature", hint="add --signature")
    keyless = [f for f, v in (("--identity", args.identity), ("--issuer", args.issuer),
                              ("--trusted-root", args.trusted_root)) if v]
    if args.key and keyless:
        raise UserError(f"--key with {keyless[0]}: check a key's signature or a keyless one, not both")
    if not args.key and not keyless:
        raise UserError("--signature needs the signer's public key (--key PUB.PEM), or its identity "
                        "(--identity ID --issuer URL --trusted-root FILE)")
    if keyless and len(keyless) < 3:
        missing = [f for f in ("--identity", "--issuer", "--trusted-root") if f not in keyless]
        raise UserError(f"a keyless signature is checked against an identity, an issuer and a trusted root: "
                        f"{' and '.join(missing)} missing")
    if args.platform or args.archs:
        raise UserError("--signature checks a pushed digest: --platform and --archs do not apply",
                        hint="verify the platform's own digest (it is signed too)")
    verdicts = verify_signatures(args.images, args.key, args.identity, args.issuer, args.trusted_root, args.layers)
    if args.json:
        print(json.dumps({"ok": all(v.ok for v in verdicts), "images": [v.to_json() for v in verdicts]}, indent=2))
    else:
        for verdict in verdicts:
            print("\n".join(verdict.lines()))
    return 0 if all(v.ok for v in verdicts) else 1
