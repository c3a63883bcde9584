"""Checking a signed image from its registry, with nothing else reached: `verify REF@DIGEST
--signature --key cosign.pub`. Not only signatures: the manifest (and under an index each
platform's) must hash to its digest and every config to its own (with `--layers`, every layer
too: by default a layer is taken as the manifest pins it, as a pull checks it); the signature (a
referrer, or cosign's `.sig` tag) must verify with the key and name this digest; the SBOM and the
provenance must be attached in envelopes the key signed whose statement names this digest, and
the full SBOM the SBOM's statement names must be the one attached and hash to it. Each check that
fails gives its reason; nothing is taken on a registry's word."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from enginebuild.errors import RegistryError
from enginebuild.oci.image import OCI_INDEX
from enginebuild.oci.reference import ImageRef
from enginebuild.oci.referrers import DIGEST, listed
from enginebuild.oci.registry import RegistryClient
from enginebuild.publish import signformat as formats
from enginebuild.publish.sign import signature_tag

if TYPE_CHECKING:
    from enginebuild.publish.identity import IdentityTrust
    from enginebuild.trust.signkeys import KeyTrust
from enginebuild.wire import JsonDoc, loads

MAX_DOCUMENT = 16 << 20  # an SBOM, a provenance, a signature payload
WHAT = {formats.SBOM_PREDICATE: "SBOM", formats.PROVENANCE_PREDICATE: "provenance"}


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    detail: str


@dataclass
class Verdict:
    image: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def lines(self) -> list[str]:
        return [f"{self.image}: {'ok' if c.ok else 'FAILED'} {c.what}: {c.detail}" for c in self.checks]

    def to_json(self) -> JsonDoc:
        return {"image": self.image, "ok": self.ok,
                "checks": [{"check": c.what, "ok": c.ok, "detail": c.detail} for c in self.checks]}


def verify_signed(client: RegistryClient, ref: ImageRef, trust: KeyTrust | IdentityTrust,
                  layers: bool = False) -> Verdict:
    """`layers`: every layer fetched and hashed too; else the manifests and configs are (the manifest
    pins each layer by digest, and the signature is over the manifest: a pull checks each layer)."""
    assert ref.digest is not None
    verdict = Verdict(str(ref))
    verdict.checks.append(_content(client, ref, layers))
    verdict.checks.append(_signature(client, ref, ref.digest, trust))
    verdict.checks.extend(_attestations(client, ref, ref.digest, trust))
    return verdict


def _content(client: RegistryClient, ref: ImageRef, layers: bool) -> Check:
    """The manifest, and under an index each platform's, hash to their digests; so do their
    configs, and with `layers` their layers."""
    try:
        checked = list(_blobs_checked(client, ref, layers))
    except _Bad as exc:
        return Check("content", False, str(exc))
    except RegistryError as exc:
        return Check("content", False, exc.message)
    fetched = sum(1 for _, was in checked if was)
    pinned = len(checked) - fetched
    return Check("content", True, f"the manifest and {fetched} blob(s) hash to their digests"
                 + (f"; {pinned} layer(s) pinned by digest, not fetched (--layers fetches them)" if pinned else ""))


class _Bad(Exception):
    pass


def _blobs_checked(client: RegistryClient, ref: ImageRef, layers: bool, where: str = "") -> Iterator[tuple[str, bool]]:
    """(digest, whether it was fetched and hashed) of each blob under `ref`."""
    assert ref.digest is not None
    digest, media_type, body = client.manifest(ref)  # refuses bytes that do not hash to ref.digest
    doc = _json(body, f"the manifest{where}")
    if media_type == OCI_INDEX or "manifests" in doc:
        for entry in _list(doc, "manifests", f"the index{where}"):
            if not isinstance(entry, dict):
                raise _Bad(f"the index{where} has a manifest entry that is not an object")
            platform = entry.get("platform")
            platform = platform if isinstance(platform, dict) else {}
            name = f" of {platform.get('os')}/{platform.get('architecture')}"
            yield from _blobs_checked(client, ImageRef(ref.registry, ref.repository, None, _digest(entry, name)),
                                      layers, name)
        return
    blobs = [("config", doc.get("config"))] + [(f"layer {n}", layer)
                                                 for n, layer in enumerate(_list(doc, "layers", f"the manifest{where}"))]
    for what, descriptor in blobs:
        if not isinstance(descriptor, dict):
            raise _Bad(f"the manifest{where} has no {what} descriptor")
        blob = _digest(descriptor, f"{what}{where}")
        size = descriptor.get("size")
        if what != "config" and not layers:
            yield blob, False
            continue
        sha, length = hashlib.sha256(), 0
        with client.open_blob(ref, blob) as response:
            for chunk in response.iter_content(1 << 20):
                sha.update(chunk)
                length += len(chunk)
        if f"sha256:{sha.hexdigest()}" != blob:
            raise _Bad(f"{what}{where} ({blob[:19]}): the registry serves bytes that hash to "
                       f"sha256:{sha.hexdigest()[:12]}, not to its digest (changed since it was signed)")
        if length != size:
            raise _Bad(f"{what}{where} ({blob[:19]}): {length} bytes, the manifest says {size}")
        yield blob, True


def signature_check(client: RegistryClient, ref: ImageRef, digest: str, trust: KeyTrust | IdentityTrust) -> Check:
    """Whether a signature `trust` accepts names the manifest `digest` (an artifact's, a platform's)."""
    return _signature(client, ref, digest, trust)


def _signature(client: RegistryClient, ref: ImageRef, digest: str, trust: KeyTrust | IdentityTrust) -> Check:
    """One signature, a referrer or under cosign's `.sig` tag, that the key made over a payload
    naming `digest`."""
    found: list[str] = []
    try:
        manifests = [entry["digest"] for entry in listed(client, ref, digest)
                     if entry.get("artifactType") == formats.SIGNATURE_ARTIFACT]
        tag = ImageRef(ref.registry, ref.repository, signature_tag(digest), None)
        if client.head_digest(tag):
            manifests.append(signature_tag(digest))
        for reference in manifests:
            pinned = reference if reference.startswith("sha256:") else None
            manifest_ref = ImageRef(ref.registry, ref.repository, None if pinned else reference, pinned)
            _, _, body = client.manifest(manifest_ref)
            for layer in _list(_json(body, "a signature manifest"), "layers", "a signature manifest"):
                outcome = _one_signature(client, ref, layer, digest, trust)
                if outcome is None:
                    return Check("signature", True, f"{trust.describe} (cosign simple signing, "
                                                    f"{'tag ' + reference if not pinned else 'referrer'})")
                found.append(outcome)
    except (RegistryError, _Bad) as exc:
        return Check("signature", False, getattr(exc, "message", str(exc)))
    if not found:
        return Check("signature", False, f"no signature attached (no referrer of type {formats.SIGNATURE_ARTIFACT}, "
                                         f"no tag {signature_tag(digest)})")
    return Check("signature", False, "; ".join(dict.fromkeys(found)))


def _one_signature(client: RegistryClient, ref: ImageRef, layer: object, digest: str,
                   trust: KeyTrust | IdentityTrust) -> str | None:
    """None when this layer is a signature of `digest` by `key`, else why not."""
    if not isinstance(layer, dict) or layer.get("mediaType") != formats.SIMPLE_SIGNING:
        return "a signature manifest's layer is not a simple-signing payload"
    encoded = (layer.get("annotations") or {}).get(formats.SIGNATURE_ANNOTATION)
    try:
        signature = base64.b64decode(encoded, validate=True) if isinstance(encoded, str) else b""
    except binascii.Error:
        signature = b""
    if not signature:
        return "a signature layer carries no signature annotation"
    payload = client.read_blob(ref, _digest(layer, "a signature layer"), limit=MAX_DOCUMENT)
    refused = trust.check_message(payload, signature, layer.get("annotations") or {})
    if refused:
        return refused
    try:
        _, signed = formats.signed_digest(payload)
    except formats.Refused as exc:
        return str(exc)
    if signed != digest:
        return f"the signature is of {signed[:19]}, not of this image (a signature moved from another image)"
    return None


def _attestations(client: RegistryClient, ref: ImageRef, digest: str, trust: KeyTrust | IdentityTrust) -> list[Check]:
    """The SBOM and the provenance: each in a bundle the key signed whose statement names `digest`."""
    reasons: dict[str, list[str]] = {kind: [] for kind in WHAT}
    held: set[str] = set()
    unsigned: list[str] = []
    sboms: list[JsonDoc] = []  # the plain SBOM referrers: the full SBOM a signed statement names
    try:
        for entry in listed(client, ref, digest):
            if entry.get("artifactType") != formats.BUNDLE:
                if entry.get("artifactType") in (formats.SBOM_MEDIA_TYPE, "application/vnd.in-toto+json"):
                    unsigned.append(entry["artifactType"])
                if entry.get("artifactType") == formats.SBOM_MEDIA_TYPE:
                    sboms.append(entry)
                continue
            found = _bundle(client, ref, entry, digest, trust, sboms)
            if found is None:
                continue
            kind, reason = found
            if reason:
                reasons.setdefault(kind, []).append(reason)
            else:
                held.add(kind)
    except (RegistryError, _Bad) as exc:
        return [Check("attestations", False, getattr(exc, "message", str(exc)))]
    checks = []
    for kind, name in WHAT.items():
        if kind in held:
            checks.append(Check(name, True, f"attached, {trust.describe}, its statement names this image"))
            continue
        why = reasons.get(kind) or reasons.get("") or []
        if not why:
            why = ["not attached as a signed envelope" + (" (only unsigned documents are attached)" if unsigned else "")]
        checks.append(Check(name, False, "; ".join(dict.fromkeys(why))))
    return checks


def _bundle(client: RegistryClient, ref: ImageRef, entry: JsonDoc, digest: str, trust: KeyTrust | IdentityTrust,
            sboms: list[JsonDoc]) -> tuple[str, str] | None:
    """(the kind it attests, why it does not count: "" when it does) of one signed bundle
    referring to the image; None for one that attests nothing `verify` asks for."""
    _, _, body = client.manifest(ImageRef(ref.registry, ref.repository, None, entry["digest"]))
    manifest = _json(body, "an attestation manifest")
    layers = _list(manifest, "layers", "an attestation manifest")
    if not layers or not isinstance(layers[0], dict):
        return None
    document = client.read_blob(ref, _digest(layers[0], "an attestation"), limit=MAX_DOCUMENT)
    claimed = str((manifest.get("annotations") or {}).get(formats.PREDICATE_ANNOTATION, ""))
    try:
        statement = formats.open_bundle(document, trust)
    except formats.Refused as exc:
        return claimed, str(exc)
    kind = statement.predicate_type
    if kind not in WHAT:
        return None
    if digest not in statement.digests:
        return kind, (f"its signed statement names {', '.join(sorted(d[:19] for d in statement.digests))}, not "
                      "this image (moved from another image, or its subject changed)")
    if kind == formats.SBOM_PREDICATE:
        broken = _sbom_link(client, ref, statement.predicate, sboms)
        if broken:
            return kind, broken
    return kind, ""


def _sbom_link(client: RegistryClient, ref: ImageRef, predicate: object, sboms: list[JsonDoc]) -> str | None:
    """None when the full SBOM the signed statement names is attached to this image and hashes to
    what it names (format 2), or the statement carries the SBOM itself (format 1); else why not."""
    if isinstance(predicate, dict) and "components" in predicate and not predicate.get("externalReferences"):
        return None  # format 1: the SBOM signed in full
    try:
        named = formats.referenced_sbom(predicate)
    except formats.Refused as exc:
        return str(exc)
    carried = set()
    for entry in sboms:
        _, _, body = client.manifest(ImageRef(ref.registry, ref.repository, None, _digest(entry, "an SBOM referrer")))
        layers = _list(_json(body, "an SBOM referrer"), "layers", "an SBOM referrer")
        carried |= {_digest(layer, "an SBOM referrer's layer") for layer in layers[:1] if isinstance(layer, dict)}
    if named.sha256 not in carried:
        shown = ", ".join(sorted(d[:19] for d in carried)) or "none"
        return (f"the full SBOM its signed statement names ({named.sha256[:19]}) is not the one attached to this "
                f"image ({shown}): replaced or moved since it was signed")
    if named.size > MAX_DOCUMENT:
        return f"the full SBOM {named.sha256[:19]}: {named.size} bytes is more than an SBOM is read to ({MAX_DOCUMENT})"
    try:
        data = client.read_blob(ref, named.sha256, limit=max(named.size, 1))
    except RegistryError as exc:
        return f"the full SBOM {named.sha256[:19]} cannot be read as signed: {exc.message}"
    if len(data) != named.size:
        return f"the full SBOM {named.sha256[:19]} is {len(data)} bytes, its signed statement says {named.size}"
    return None


def _json(body: bytes, what: str) -> JsonDoc:
    try:
        doc = loads(body)
    except ValueError:
        raise _Bad(f"{what} is not JSON") from None
    if not isinstance(doc, dict):
        raise _Bad(f"{what} is not a JSON object")
    return doc


def _list(doc: JsonDoc, key: str, what: str) -> list[object]:
    value = doc.get(key)
    if not isinstance(value, list):
        raise _Bad(f"{what} has no `{key}` list")
    return value


def _digest(descriptor: JsonDoc, what: str) -> str:
    value = descriptor.get("digest")
    if not isinstance(value, str) or not DIGEST.fullmatch(value):
        raise _Bad(f"{what}: {str(value)[:80]!r} is not a sha256 digest")
    return value
