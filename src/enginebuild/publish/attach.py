"""Attaching the SBOM and the provenance to a pushed image as OCI referrers: artifact manifests
whose `subject` is the image. A registry with the referrers API finds them itself; for one
without (distribution 2.8), the referrers tag scheme is kept up to date: an index at the
tag `sha256-<digest>` listing them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from enginebuild.errors import RegistryError
from enginebuild.io.store import Store
from enginebuild.oci.image import OCI_INDEX, OCI_MANIFEST, canonical
from enginebuild.oci.reference import ImageRef
from enginebuild.oci.registry import sha256_digest
from enginebuild.publish.provenance import make_provenance
from enginebuild.publish.sbom import make_sbom
from enginebuild.settings import settings
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    from pathlib import Path

    from enginebuild.lock.lockfile import Lock
    from enginebuild.oci.push import Pusher
    from enginebuild.plan.model import ImagePlan
    from enginebuild.spec.model import ImageSpec

SBOM_TYPE = "application/vnd.cyclonedx+json"
PROVENANCE_TYPE = "application/vnd.in-toto+json"
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"


def fallback_tag(digest: str) -> str:
    return digest.replace(":", "-")


def attach(pusher: Any, subject_digest: str, subject_type: str, subject_size: int, document: bytes,
           artifact_type: str) -> tuple[str, int]:
    """Push one referrer; returns its manifest's (digest, size)."""
    target = pusher.target
    pusher.data(EMPTY, "empty config")
    layer = pusher.data(document, artifact_type)
    manifest = canonical({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": artifact_type,
        "config": {"mediaType": EMPTY_TYPE, "digest": sha256_digest(EMPTY), "size": len(EMPTY)},
        "layers": [{"mediaType": artifact_type, "digest": layer, "size": len(document)}],
        "subject": {"mediaType": subject_type, "digest": subject_digest, "size": subject_size},
    })
    digest = pusher.client.put_manifest(target, sha256_digest(manifest), manifest, OCI_MANIFEST)
    return digest, len(manifest)


def update_fallback_index(pusher: Any, subject_digest: str, referrers: list[tuple[str, int, str]]) -> None:
    """The referrers tag scheme: merge these referrers into the index at `sha256-<digest>`."""
    client, target = pusher.client, pusher.target
    tag = fallback_tag(subject_digest)
    manifests: list[dict[str, Any]] = []
    if client.head_digest(ImageRef(target.registry, target.repository, tag, None)):
        _, _, body = client.manifest(ImageRef(target.registry, target.repository, tag, None))
        manifests = list(json.loads(body).get("manifests", []))
    known = {m["digest"] for m in manifests}
    for digest, size, kind in referrers:
        if digest not in known:
            manifests.append({"mediaType": OCI_MANIFEST, "digest": digest, "size": size, "artifactType": kind})
    body = canonical({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests})
    client.put_manifest(target, tag, body, OCI_INDEX)


def attach_documents(pusher: Pusher, root: Path, spec: ImageSpec, lock: Lock, plans: list[ImagePlan],
                     digest: str, outputs: dict[str, JsonDoc], parameters: JsonDoc | None = None) -> dict[str, str]:
    """Push the SBOM and the provenance of the image (or index) `digest` as its referrers
    (`outputs`: each component's outputs record, by name, that the SBOM names)."""

    client, target = pusher.client, pusher.target
    _, media_type, body = client.manifest(ImageRef(target.registry, target.repository, None, digest))
    store = Store(settings().home)
    if media_type == OCI_INDEX:
        platforms = {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"]
                     for m in json.loads(body)["manifests"]}
    else:
        platforms = {plans[0].platform: digest}
    documents = ((make_sbom(spec, lock, target.name, outputs, store), SBOM_TYPE),
                 (make_provenance(root, spec, lock, target.name, digest, platforms, parameters or {}), PROVENANCE_TYPE))
    referrers = []
    for document, kind in documents:
        ref_digest, size = attach(pusher, digest, media_type, len(body), document, kind)
        referrers.append((ref_digest, size, kind))
    try:
        has_api = client.referrers(target, digest) is not None
    except RegistryError:
        has_api = False
    if not has_api:
        update_fallback_index(pusher, digest, referrers)
    return {"sbom": referrers[0][0], "provenance": referrers[1][0]}
