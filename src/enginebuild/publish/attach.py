"""Attaching the SBOM and the provenance to a pushed image as OCI referrers: artifact manifests
whose `subject` is the image. A registry with the referrers API finds them itself; for one
without (distribution 2.8), the referrers tag scheme is kept up to date: an index at the
tag `sha256-<digest>` listing them."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from enginebuild.io.store import Store
from enginebuild.oci.image import OCI_INDEX
from enginebuild.oci.reference import ImageRef
from enginebuild.oci.referrers import Referrer, attach, has_referrers_api, update_fallback_index
from enginebuild.publish.provenance import make_provenance
from enginebuild.publish.sbom import make_sbom
from enginebuild.publish.sign import sign_image
from enginebuild.settings import settings
from enginebuild.wire import JsonDoc, loads

if TYPE_CHECKING:
    from pathlib import Path

    from enginebuild.lock.lockfile import Lock
    from enginebuild.oci.push import Pusher
    from enginebuild.plan.model import ImagePlan
    from enginebuild.publish.keyless import KeylessSigner
    from enginebuild.recipe.model import ImageSpec
    from enginebuild.trust.signkeys import Signer

SBOM_TYPE = "application/vnd.cyclonedx+json"
PROVENANCE_TYPE = "application/vnd.in-toto+json"


def attach_documents(pusher: Pusher, root: Path, spec: ImageSpec, lock: Lock, plans: list[ImagePlan],
                     digest: str, outputs: dict[str, JsonDoc], parameters: JsonDoc | None = None,
                     signer: Signer | KeylessSigner | None = None) -> dict[str, str]:
    """Push the SBOM and the provenance of the image (or index) `digest` as its referrers
    (`outputs`: each component's outputs record, by name, that the SBOM names); with `signer`,
    signed (publish/sign.py): the image and each platform's manifest signed, the SBOM and the
    provenance in signed envelopes attached to each."""

    client, target = pusher.client, pusher.target
    _, media_type, body = client.manifest(ImageRef(target.registry, target.repository, None, digest))
    store = Store(settings().home)
    if media_type == OCI_INDEX:
        platforms = {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"]
                     for m in loads(body)["manifests"]}
    else:
        platforms = {plans[0].platform: digest}
    sbom = make_sbom(spec, lock, target.name, outputs, store)
    provenance = make_provenance(root, spec, lock, target.name, digest, platforms, parameters or {},
                                 sbom=hashlib.sha256(sbom).hexdigest())
    has_api = has_referrers_api(client, target, digest)
    # the documents themselves, signed or not: one SBOM blob for every digest that shares it
    referrers: list[Referrer] = []
    for document, kind in ((sbom, SBOM_TYPE), (provenance, PROVENANCE_TYPE)):
        ref_digest, size = attach(pusher, digest, media_type, len(body), document, kind)
        referrers.append((ref_digest, size, kind, {}))
    if not has_api:
        update_fallback_index(pusher, digest, referrers)
    attached = {"sbom": referrers[0][0], "provenance": referrers[1][0]}
    if signer is not None:

        signed = sign_image(pusher, signer, digest, sbom, provenance, has_api)
        attached = {"sbom": referrers[0][0], "provenance": referrers[1][0], "sbom-statement": signed[0][0],
                    "provenance-statement": signed[1][0], "signed-by": signer.who}
    return attached
