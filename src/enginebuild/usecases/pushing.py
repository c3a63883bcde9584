"""Pushing a built image, the use case behind `push` and `image --push`: every platform's
manifest and an OCI index tying them, each tag confirmed against the registry, layers scanned
for secrets first, the SBOM and provenance attached, the push recorded. A push that fails
records nothing."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

from enginebuild.errors import BuildFailed, UserError, command
from enginebuild.execution.assemble import Assembler
from enginebuild.execution.executor import final_config
from enginebuild.execution.secretscan import Scanner
from enginebuild.io import faults
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.oci.image import Layer
from enginebuild.oci.push import COMPRESSIONS, Pusher
from enginebuild.oci.reference import ImageRef, parse_destination
from enginebuild.plan.image import LAYER_KINDS, Options, plan_image
from enginebuild.plan.model import ImagePlan
from enginebuild.plan.stored import layer_blobs
from enginebuild.publish.attach import attach_documents
from enginebuild.publish.changed import content_tag
from enginebuild.publish.keyless import KeylessSigner
from enginebuild.publish.records import add_record
from enginebuild.recipe.model import ImageSpec
from enginebuild.registrycache import substitutes
from enginebuild.registrycache.cache import LayerCache
from enginebuild.state.lastsettings import last_settings
from enginebuild.trust.signkeys import Signer
from enginebuild.usecases.building import BuildRequest, build_platform
from enginebuild.usecases.targets import platforms_of
from enginebuild.wire import JsonDoc
from enginebuild.workspace import Workspace

TAG_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"


def destination(to: str, tags: list[str]) -> tuple[ImageRef, list[str]]:
    ref, explicit = parse_destination(to)
    tags = list(tags) + ([explicit] if explicit else [])
    for tag in tags:
        if not re.fullmatch(TAG_PATTERN, tag):
            raise UserError(f"--tag {tag!r}: a tag is 1-128 of A-Z a-z 0-9 _ . - (not starting with . or -)")
    return ref, tags


def push_image(ws: Workspace, name: str, to: str, tags: list[str], platforms: list[str] | None = None,
               attach: bool = True, plans: list[ImagePlan] | None = None,
               options: Options | None = None, compression: str = "gzip",
               cache: LayerCache | None = None, signer: Signer | KeylessSigner | None = None) -> list[JsonDoc]:
    """Push what was built (`plans`, as `image --push` built them; else planned here from the spec
    and lock) by digest, each tag confirmed, the SBOM and provenance attached, a record kept; the
    records, one per tag, are returned (`repository`@`digest` is what a user pulls)."""

    target, tags = destination(to, tags)
    spec = ws.spec(name)
    lock = ws.lock(spec)
    options = options or ws.plan_options()
    if plans is None:
        plans = [plan_image(spec, lock, p, options) for p in platforms_of(spec, list(platforms or []))]
    store = Store(ws.home)
    for plan in plans:
        missing = [n.name for n in plan.runtime.layers if layer_blobs(store, n) is None]
        if missing:
            last = last_settings(store, name)
            if last and tuple(last) != ws.overrides:  # built with other --set: a push is of the image its inputs make
                given = " ".join(f"--set {v}" for v in last)
                raise BuildFailed(f"{name} ({plan.platform}) is not built at these inputs: its last build here was "
                                  f"given {given}, which changes its inputs ({missing[0]} is another layer)",
                                  hint=f"push with the same values: `{command()} push {name} {given} --to {to}`")
            raise BuildFailed(f"{name} ({plan.platform}) is not built at its current inputs ({missing[0]} is missing)",
                              hint=f"run `{command()} image {name}` first, or `image {name} --push --to {to}`")
        damaged = [n.name for n in plan.runtime.layers if not substitutes.substituted(store, n)
                   and not all(store.intact(sha, n.name) for sha, _ in layer_blobs(store, n) or ())]
        if damaged:  # built before, damaged in the store since: made again now, as `image` would
            output().say(f"  {name} ({plan.platform}): {', '.join(damaged)} damaged in the store; making it again")
            remake(ws, spec, plan)
    tags = tags or [content_tag(plans, compression)]
    assembler = Assembler(ws.engine(), store)
    scanner = Scanner(spec, store=store)
    for plan in plans:
        if scanner.declared and scanner.values():  # searched here: the bytes a registry stood in are fetched
            substitutes.realize_all(store, plan.runtime.layers)
        ours = [(layer.blob, layer.created_by) for layer in assembler.layers(plan.runtime) if layer.blob]
        scanner.check_layers(ours, f"image {name} ({plan.platform})", at_push=True)
    pusher = Pusher(ws.registry(), store, target, COMPRESSIONS[compression])
    manifests = []
    for plan in plans:
        layers = assembler.layers(plan.runtime)
        config = final_config(assembler, plan).render(layers)
        digest, size = pusher.image(layers, config, plan.runtime.base.ref if plan.runtime.base else None,
                                    plan.platform, fetcher(store, plan))
        manifests.append((digest, size, plan.platform))
    faults.reached("push.uploaded")
    if cache is not None:  # a fresh runner building the same layers takes them from the registry
        substitutes.announce(cache, store, plans)
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
                      "compression": compression, "layers_pushed": pusher.stats.layers_pushed,
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


def fetcher(store: Store, plan: ImagePlan) -> Callable[[Layer], None]:
    """For the pusher: fetch the bytes of a layer a registry stood in (to compress them here)."""
    by_blob = {sha: node for node in plan.runtime.layers for sha, _ in layer_blobs(store, node) or ()}

    def fetch(layer: Layer) -> None:
        substitutes.realize(store, by_blob[str(layer.blob)])

    return fetch


def remake(ws: Workspace, spec: ImageSpec, plan: ImagePlan) -> None:
    """Build `plan` again as `image` would (only what is missing or damaged is made)."""
    build_platform(ws, spec, plan, BuildRequest(), None, tuple(spec.platforms))


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

