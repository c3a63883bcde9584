"""OCI referrers: artifact manifests whose `subject` is an image. Pushing one, keeping the
referrers tag scheme (an index at the tag `sha256-<hex>` listing them) for a registry without the
referrers API, and listing them back through either. What a registry lists is hostile: each entry
is checked to be a descriptor (a digest, a size, types as text) before it is returned."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypeGuard

from enginebuild.errors import RegistryError
from enginebuild.oci.image import OCI_INDEX, OCI_MANIFEST, canonical
from enginebuild.oci.reference import ImageRef
from enginebuild.oci.registry import RegistryApi, sha256_digest
from enginebuild.wire import JsonDoc, Parsed, loads

if TYPE_CHECKING:
    from enginebuild.oci.push import Pusher

EMPTY_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY = b"{}"
MAX_INDEX = 4 << 20
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")

Referrer = tuple[str, int, str, dict[str, str]]  # (digest, size, artifact type, annotations)


def fallback_tag(digest: str) -> str:
    return digest.replace(":", "-")


def attach(pusher: Pusher, subject_digest: str, subject_type: str, subject_size: int, document: bytes,
           artifact_type: str, annotations: dict[str, str] | None = None) -> tuple[str, int]:
    """Push one referrer carrying `document`; returns its manifest's (digest, size)."""
    pusher.data(EMPTY, "empty config")
    layer = pusher.data(document, artifact_type)
    manifest = canonical({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": artifact_type,
        "config": {"mediaType": EMPTY_TYPE, "digest": sha256_digest(EMPTY), "size": len(EMPTY)},
        "layers": [{"mediaType": artifact_type, "digest": layer, "size": len(document)}],
        "subject": {"mediaType": subject_type, "digest": subject_digest, "size": subject_size},
        **({"annotations": annotations} if annotations else {}),
    })
    digest = pusher.client.put_manifest(pusher.target, sha256_digest(manifest), manifest, OCI_MANIFEST)
    return digest, len(manifest)


def update_fallback_index(pusher: Pusher, subject_digest: str, referrers: list[Referrer]) -> None:
    """The referrers tag scheme: merge these referrers into the index at `sha256-<hex>`."""
    client, target = pusher.client, pusher.target
    manifests = _tag_index(client, target, subject_digest)
    known = {m["digest"] for m in manifests}
    for digest, size, kind, notes in referrers:
        if digest not in known:
            manifests.append({"mediaType": OCI_MANIFEST, "digest": digest, "size": size, "artifactType": kind,
                              **({"annotations": notes} if notes else {})})
    body = canonical({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests})
    client.put_manifest(target, fallback_tag(subject_digest), body, OCI_INDEX)


def has_referrers_api(client: RegistryApi, target: ImageRef, digest: str) -> bool:
    try:
        return client.referrers(target, digest) is not None
    except RegistryError:
        return False


def listed(client: RegistryApi, target: ImageRef, digest: str) -> list[JsonDoc]:
    """The referrers of `digest`: the registry's referrers API, else the referrers tag's index."""
    try:
        index = client.referrers(target, digest)
    except RegistryError:
        index = None
    entries = list(index.get("manifests") or []) if isinstance(index, dict) else _tag_index(client, target, digest)
    return [e for e in entries if _descriptor(e)]


def tagged_list(client: RegistryApi, target: ImageRef, tag: str, key: str, what: str) -> list[object]:
    """The list `key` of the small manifest or index at `tag` ([] when the tag, the list or JSON
    is missing); one larger than MAX_INDEX is refused, as not the `what` it should be."""
    ref = ImageRef(target.registry, target.repository, tag, None)
    if not client.head_digest(ref):
        return []
    _, _, body = client.manifest(ref)
    if len(body) > MAX_INDEX:
        raise RegistryError(f"{target.name}:{tag}: {len(body)} bytes is not {what}")
    try:
        found = loads(body).get(key, [])
    except (ValueError, AttributeError):
        return []
    return found if isinstance(found, list) else []


def _tag_index(client: RegistryApi, target: ImageRef, digest: str) -> list[JsonDoc]:
    manifests = tagged_list(client, target, fallback_tag(digest), "manifests", "a referrers index")
    return [m for m in manifests if _descriptor(m)]


def _descriptor(entry: Parsed) -> TypeGuard[JsonDoc]:
    return (isinstance(entry, dict) and isinstance(entry.get("digest"), str) and bool(DIGEST.fullmatch(entry["digest"]))
            and isinstance(entry.get("size"), int) and isinstance(entry.get("artifactType", ""), str)
            and isinstance(entry.get("annotations", {}), dict))
