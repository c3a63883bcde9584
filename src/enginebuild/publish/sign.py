"""Signing a pushed image: the index and every platform manifest get a signature and the signed
SBOM and provenance (formats.py), attached as OCI referrers (their `subject` is the manifest).
A registry with the referrers API lists them itself; on one without, the signatures go under
cosign's tag `sha256-<hex>.sig` (one manifest whose layers are the signatures, merged with those
already there) and the attestations into the OCI referrers tag `sha256-<hex>` (publish/attach.py).
The bundles' blobs are pushed once and named by each manifest's referrers."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING

from enginebuild.oci.image import OCI_INDEX, OCI_MANIFEST, canonical
from enginebuild.oci.reference import ImageRef
from enginebuild.oci.referrers import DIGEST, EMPTY, EMPTY_TYPE, Referrer, attach, tagged_list, update_fallback_index
from enginebuild.oci.registry import sha256_digest
from enginebuild.publish import signformat as formats

if TYPE_CHECKING:
    from enginebuild.publish.keyless import KeylessSigner
    from enginebuild.trust.signkeys import Signer
from enginebuild.wire import JsonDoc, loads

if TYPE_CHECKING:
    from enginebuild.oci.push import Pusher



@dataclass(frozen=True)
class Subject:
    digest: str
    media_type: str
    size: int

    def descriptor(self) -> JsonDoc:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


def signature_tag(digest: str) -> str:
    return digest.replace(":", "-") + ".sig"


def subjects_of(pusher: Pusher, digest: str) -> tuple[list[Subject], dict[str, str]]:
    """The pushed manifest and, under an index, each platform's: what gets signed; with the
    platforms' digests by platform."""
    client, target = pusher.client, pusher.target
    _, media_type, body = client.manifest(ImageRef(target.registry, target.repository, None, digest))
    found = [Subject(digest, media_type, len(body))]
    platforms: dict[str, str] = {}
    if media_type == OCI_INDEX:
        for entry in loads(body)["manifests"]:
            found.append(Subject(entry["digest"], entry["mediaType"], entry["size"]))
            platforms[f"{entry['platform']['os']}/{entry['platform']['architecture']}"] = entry["digest"]
    return found, platforms


def sign_image(pusher: Pusher, signer: Signer | KeylessSigner, digest: str, sbom: bytes, provenance: bytes,
               has_api: bool) -> list[Referrer]:
    """Sign `digest` (and its platforms) and attach the signed SBOM statement and provenance to each,
    and the full SBOM to each platform (the caller attached it, and the plain provenance, to
    `digest`); returns the attestation referrers of `digest` itself."""
    subjects, platforms = subjects_of(pusher, digest)
    named = formats.subjects(pusher.target.name, digest, platforms)
    statements = [(formats.statement(named, formats.SBOM_PREDICATE,
                                     formats.sbom_reference(sbom, pusher.target.name, digest)), formats.SBOM_PREDICATE),
                  (provenance, formats.PROVENANCE_PREDICATE)]
    bundles = [(formats.bundle(signer, payload), kind) for payload, kind in statements]
    own: list[Referrer] = []
    for subject in subjects:
        referrers: list[Referrer] = []
        if subject.digest != digest:  # the full SBOM the statement names, beside it (the caller attached `digest`'s)
            ref_digest, size = attach(pusher, subject.digest, subject.media_type, subject.size, sbom,
                                      formats.SBOM_MEDIA_TYPE)
            referrers.append((ref_digest, size, formats.SBOM_MEDIA_TYPE, {}))
        for document, kind in bundles:
            annotations = {formats.PREDICATE_ANNOTATION: kind}
            ref_digest, size = attach(pusher, subject.digest, subject.media_type, subject.size, document,
                                      formats.BUNDLE, annotations)
            referrers.append((ref_digest, size, formats.BUNDLE, annotations))
        if not has_api:
            update_fallback_index(pusher, subject.digest, referrers)
        if subject.digest == digest:
            own = referrers
        attach_signature(pusher, signer, subject, has_api)
    return own


def attach_signature(pusher: Pusher, signer: Signer | KeylessSigner, subject: Subject, has_api: bool) -> str:
    """The signature of one manifest: a referrer, or a layer of the `.sig` tag's manifest."""
    client, target = pusher.client, pusher.target
    payload = formats.simple_signing(target.name, subject.digest)
    signature = signer.sign(payload)
    layer = {"mediaType": formats.SIMPLE_SIGNING, "digest": pusher.data(payload, "signature"), "size": len(payload),
             "annotations": {formats.SIGNATURE_ANNOTATION: base64.b64encode(signature).decode(),
                             **signer.message_annotations(payload, signature)}}
    if has_api:
        pusher.data(EMPTY, "empty config")
        manifest = canonical({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                              "artifactType": formats.SIGNATURE_ARTIFACT,
                              "config": {"mediaType": EMPTY_TYPE, "digest": sha256_digest(EMPTY), "size": len(EMPTY)},
                              "layers": [layer], "subject": subject.descriptor()})
        return client.put_manifest(target, sha256_digest(manifest), manifest, OCI_MANIFEST)
    tag = signature_tag(subject.digest)
    layers = [entry for entry in _tagged_signatures(pusher, tag) if entry != layer] + [layer]
    config = canonical({"architecture": "", "os": "", "config": {},
                        "rootfs": {"type": "layers", "diff_ids": [entry["digest"] for entry in layers]}})
    manifest = canonical({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                          "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                     "digest": pusher.data(config, "signature config"), "size": len(config)},
                          "layers": layers})
    return client.put_manifest(target, tag, manifest, OCI_MANIFEST)


def _tagged_signatures(pusher: Pusher, tag: str) -> list[JsonDoc]:
    """The signature layers already under the `.sig` tag (another key's, an earlier push's)."""
    layers = tagged_list(pusher.client, pusher.target, tag, "layers", "a signature manifest")
    return [entry for entry in layers if isinstance(entry, dict) and entry.get("mediaType") == formats.SIMPLE_SIGNING
            and isinstance(entry.get("digest"), str) and DIGEST.fullmatch(entry["digest"])
            and isinstance(entry.get("size"), int) and isinstance(entry.get("annotations"), dict)]
