"""Pushing a built image, the use case behind `push` and `image --push`: every platform's
manifest and an OCI index tying them, each tag confirmed against the registry, layers scanned
for secrets first, the SBOM and provenance attached, the push recorded. A push that fails
records nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from enginebuild.execution.assemble import Assembler
from enginebuild.execution.executor import final_config
from enginebuild.execution.secretscan import Scanner
from enginebuild.io import faults
from enginebuild.io.store import Store
from enginebuild.oci.push import COMPRESSIONS, Pusher
from enginebuild.plan.image import Options, plan_image
from enginebuild.plan.model import ImagePlan
from enginebuild.publish.changed import content_tag
from enginebuild.registrycache import substitutes
from enginebuild.usecases.pushready import fetcher, ready_to_push
from enginebuild.usecases.pushrecord import tag_and_record
from enginebuild.usecases.targets import destination, platforms_of
from enginebuild.wire import JsonDoc
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.publish.keyless import KeylessSigner
    from enginebuild.registrycache.cache import LayerCache
    from enginebuild.trust.signkeys import Signer


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
    ready_to_push(ws, name, plans, to)
    store = Store(ws.home)
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
    return tag_and_record(ws, spec, lock, plans, pusher, target, tags, manifests, options, attach, signer)

