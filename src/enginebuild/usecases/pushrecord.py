"""Each tag of a push: pointed at the index of the manifests pushed, confirmed against the
registry, the SBOM and provenance attached (signed when a signer is given), and the push
recorded in the image's records (publish/records.py) only once all of that is done."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from enginebuild.io import faults
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.oci.push import Pusher
from enginebuild.oci.reference import ImageRef
from enginebuild.plan.image import LAYER_KINDS, Options
from enginebuild.plan.model import ImagePlan
from enginebuild.publish.attach import attach_documents
from enginebuild.publish.records import add_record
from enginebuild.registrycache import substitutes
from enginebuild.wire import JsonDoc
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.lock.lockfile import Lock
    from enginebuild.publish.keyless import KeylessSigner
    from enginebuild.recipe.model import ImageSpec
    from enginebuild.trust.signkeys import Signer

Manifests = list[tuple[str, int, str]]  # (digest, size, platform) of each platform's manifest pushed


def tag_and_record(ws: Workspace, spec: ImageSpec, lock: Lock | None, plans: list[ImagePlan], pusher: Pusher,
                   target: ImageRef, tags: list[str], manifests: Manifests, options: Options, attach: bool,
                   signer: Signer | KeylessSigner | None) -> list[JsonDoc]:
    """The records of the push, one per tag (`repository`@`digest` is what a user pulls)."""
    store = Store(ws.home)
    results = []
    with ws.state_mutex("push records"):
        for tag in tags:
            digest = pusher.tag(tag, manifests)
            pusher.confirm(tag, digest)
            faults.reached("push.confirmed")
            attached: dict[str, str] = {}
            if attach:
                assert lock is not None  # the plans were made from it
                outputs = {c.name: r for c in plans[0].components if (r := substitutes.outputs_of(store, c))}
                attached = attach_documents(pusher, ws.root, spec, lock, plans, digest, outputs,
                                            build_parameters(ws.overrides, options), signer)
            record = {"repository": target.name, "tag": tag, "digest": digest,
                      "platforms": {p: d for d, _, p in manifests},
                      "pushed_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
                      .replace("+00:00", "Z"),
                      "compression": pusher.compression.name, "layers_pushed": pusher.stats.layers_pushed,
                      "layers_mounted": pusher.stats.layers_mounted,
                      "bytes_pushed": pusher.stats.bytes_pushed,
                      **({"attached": attached} if attached else {})}
            add_record(ws.root, spec.name, spec.lock_name, record)
            results.append(record)
            output().say(f"  {target.name}:{tag}: {pusher.stats.layers_pushed} blob(s) uploaded "
                         f"({pusher.stats.bytes_pushed} bytes), {pusher.stats.layers_existing} already there, "
                         f"{pusher.stats.layers_mounted} mounted from another repository"
                         + "".join(f"; {k} {v}" for k, v in attached.items()))
    return results


def build_parameters(overrides: tuple[str, ...], options: Options) -> JsonDoc:
    """The per-build values the image was built with, for its provenance: every `--set`, every
    `--build-arg`, the stand-in base of `--on` and the layer kinds of `--stages`."""
    out: JsonDoc = {}
    if overrides:
        out["set"] = list(overrides)
    if options.build_args:
        out["buildArgs"] = dict(sorted(options.build_args.items()))
    if options.on:
        out["on"] = options.on
    if options.only != frozenset(LAYER_KINDS):
        out["stages"] = sorted(options.only)
    return out
