"""Push a built image, every platform it was built for, to REGISTRY/REPO: one manifest per
platform and an OCI index tying them together; print REPO@sha256:..., check that digest
against the registry, and record it in lockfiles/<image>.pushes.json. Layers are scanned
for secrets first; an SBOM and a provenance statement are attached (unless --no-attach).
A push that fails records nothing."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from enginebuild.errors import BuildFailed, UserError, command
from enginebuild.io import faults
from enginebuild.io.progress import output
from enginebuild.workspace import Workspace

TAG_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", metavar="IMAGE")
    parser.add_argument("--to", required=True, metavar="REPO", help="REGISTRY/REPO[:TAG], e.g. ghcr.io/org/qwen36-dflash")
    parser.add_argument("--tag", action="append", default=[], help="tag to push (repeatable; default: a content tag)")
    parser.add_argument("--platform", action="append", default=[], metavar="OS/ARCH",
                        help="push only these platforms (default: every platform of the spec)")
    parser.add_argument("--no-attach", action="store_true", help="do not attach the SBOM and provenance")


def run(args: argparse.Namespace, ws: Workspace) -> int:
    push_image(ws, args.image, args.to, args.tag, args.platform, attach=not args.no_attach)
    return 0


def destination(to: str, tags: list[str]) -> tuple[Any, list[str]]:
    import re

    from enginebuild.oci.reference import parse_destination

    ref, explicit = parse_destination(to)
    tags = list(tags) + ([explicit] if explicit else [])
    for tag in tags:
        if not re.fullmatch(TAG_PATTERN, tag):
            raise UserError(f"--tag {tag!r}: a tag is 1-128 of A-Z a-z 0-9 _ . - (not starting with . or -)")
    return ref, tags


def push_image(ws: Workspace, name: str, to: str, tags: list[str], platforms: list[str] | None = None,
               attach: bool = True) -> list[dict[str, Any]]:
    from enginebuild.build.assemble import Assembler, layer_blobs
    from enginebuild.build.executor import final_config
    from enginebuild.build.secretscan import Scanner
    from enginebuild.commands.image import platforms_of
    from enginebuild.io.store import Store
    from enginebuild.oci.engine import Engine
    from enginebuild.oci.push import Pusher
    from enginebuild.oci.registry import RegistryClient
    from enginebuild.plan.image import plan_image
    from enginebuild.publish.changed import content_tag
    from enginebuild.publish.records import add_record

    target, tags = destination(to, tags)
    spec = ws.spec(name)
    lock = ws.lock(spec)
    plans = [plan_image(spec, lock, p, ws.plan_options()) for p in platforms_of(spec, list(platforms or []))]
    store = Store(ws.home)
    for plan in plans:
        missing = [n.name for n in plan.runtime.layers if layer_blobs(store, n) is None]
        if missing:
            raise BuildFailed(f"{name} ({plan.platform}) is not built at its current inputs ({missing[0]} is missing)",
                              hint=f"run `{command()} image {name}` first, or `image {name} --push --to {to}`")
        damaged = [n.name for n in plan.runtime.layers
                   if not all(store.intact(sha, n.name) for sha, _ in layer_blobs(store, n) or ())]
        if damaged:  # built before, damaged in the store since: made again now, as `image` would
            output().say(f"  {name} ({plan.platform}): {', '.join(damaged)} damaged in the store; making it again")
            remake(ws, spec, plan)
    tags = tags or [content_tag(plans)]
    assembler = Assembler(Engine(), store)
    scanner = Scanner(spec, store=store)
    for plan in plans:
        ours = [(layer.blob, layer.created_by) for layer in assembler.layers(plan.runtime) if layer.blob]
        scanner.check_layers(ours, f"image {name} ({plan.platform})", at_push=True)
    pusher = Pusher(RegistryClient(), store, target)
    manifests = []
    for plan in plans:
        layers = assembler.layers(plan.runtime)
        config = final_config(assembler, plan).render(layers)
        digest, size = pusher.image(layers, config, plan.runtime.base.ref if plan.runtime.base else None,
                                    plan.platform)
        manifests.append((digest, size, plan.platform))
    faults.reached("push.uploaded")
    results = []
    with ws.state_mutex("push records"):
        for tag in tags:
            digest = pusher.tag(tag, manifests)
            pusher.confirm(tag, digest)
            faults.reached("push.confirmed")
            attached: dict[str, str] = {}
            if attach:
                from enginebuild.publish.attach import attach_documents

                attached = attach_documents(pusher, ws.root, spec, lock, plans, digest)
            record = {"repository": target.name, "tag": tag, "digest": digest,
                      "platforms": {p: d for d, _, p in manifests},
                      "pushed_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
                      .replace("+00:00", "Z"),
                      "layers_pushed": pusher.stats.layers_pushed, "bytes_pushed": pusher.stats.bytes_pushed,
                      **({"attached": attached} if attached else {})}
            add_record(ws.root, spec.name, spec.lock_name, record)
            results.append(record)
            print(f"{target.name}@{digest}")
            output().say(f"  {target.name}:{tag}: {pusher.stats.layers_pushed} blob(s) uploaded "
                         f"({pusher.stats.bytes_pushed} bytes), {pusher.stats.layers_existing} already there"
                         + "".join(f"; {k} {v}" for k, v in attached.items()))
    return results


def remake(ws: Workspace, spec: Any, plan: Any) -> None:
    """Build `plan` again as `image` would (only what is missing or damaged is made)."""
    import argparse

    from enginebuild.commands.image import build_platform

    args = argparse.Namespace(builder=[], buildx_builder=None, verbose=False, jobs=None)
    build_platform(ws, spec, plan, args, None, tuple(spec.platforms))
