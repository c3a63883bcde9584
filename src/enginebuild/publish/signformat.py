"""What enginebuild signs, byte for byte (format 2, docs/signing.md).

- An image's signature: cosign's simple-signing payload naming the repository and the manifest
  digest, signed as is (ECDSA P-256, sha256); the payload is the one layer of a signature
  manifest, the base64 DER signature its `dev.cosignproject.cosign/signature` annotation.
- An attestation (the SBOM, the provenance): an in-toto v1 statement whose subjects are the
  image's index and platform manifests, in a DSSE envelope (payload type
  `application/vnd.in-toto+json`, the signature over DSSE's pre-authentication encoding), carried
  in a Sigstore bundle (v0.3) whose verification material is the key's hint.
- The SBOM's statement carries a small CycloneDX document (`sbom_reference`), not the SBOM: the
  image as its component, and one external reference of type `bom` naming the full SBOM by its
  sha256 (with its media type and size as properties). The full SBOM is the plain referrer every
  push attaches, one blob for every digest that shares it; a verifier checks that blob hashes to
  what the signed statement names. Signing stays KBs however large the SBOM grows.
Every document here is canonical JSON (sorted keys, no spaces), so one version of enginebuild
writes the same bytes on every machine. Readers treat what they fetch as hostile: sizes are
limited by the caller, every field is checked for its type before it is used."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Protocol

from enginebuild.trust.signkeys import Refused as Refused  # raised here, caught as formats.Refused
from enginebuild.wire import JsonDoc, Parsed, loads

SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ARTIFACT = "application/vnd.dev.cosign.artifact.sig.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
SIGNATURE_KIND = "cosign container image signature"
BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json"
PREDICATE_ANNOTATION = "dev.sigstore.bundle.predicateType"
IN_TOTO = "application/vnd.in-toto+json"
STATEMENT = "https://in-toto.io/Statement/v1"
SBOM_PREDICATE = "https://cyclonedx.org/bom"
SBOM_MEDIA_TYPE = "application/vnd.cyclonedx+json"
FORMAT = 2
_SIZE_PROPERTY = "org.enginebuild.sbom.size"
_TYPE_PROPERTY = "org.enginebuild.sbom.mediaType"
PROVENANCE_PREDICATE = "https://slsa.dev/provenance/v1"


class EnvelopeSigner(Protocol):
    """A key (signkeys.Signer) or a keyless identity (keyless.KeylessSigner)."""

    def sign(self, data: bytes) -> bytes: ...

    def envelope_material(self, payload_type: str, payload: bytes, signature: bytes) -> JsonDoc: ...


class EnvelopeTrust(Protocol):
    """What a verifier accepts (signkeys.KeyTrust, identity.IdentityTrust)."""

    def check_envelope(self, document: JsonDoc, message: bytes, payload: bytes, signatures: list[bytes]) -> None: ...


def canonical(document: object) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def simple_signing(repository: str, digest: str) -> bytes:
    """cosign's payload for `repository@digest`. Written in cosign's own field order (it is what
    cosign prints and hashes; canonical order would be the same)."""
    return canonical({"critical": {"identity": {"docker-reference": repository},
                                   "image": {"docker-manifest-digest": digest},
                                   "type": SIGNATURE_KIND}, "optional": None})


def signed_digest(payload: bytes) -> tuple[str, str]:
    """(docker-reference, docker-manifest-digest) of a simple-signing payload; Refused when it is not one."""
    try:
        doc = loads(payload)
        critical = doc["critical"]
        digest, reference, kind = (critical["image"]["docker-manifest-digest"],
                                   critical["identity"]["docker-reference"], critical["type"])
    except (ValueError, KeyError, TypeError):
        raise Refused("the signed payload is not a simple-signing document") from None
    if kind != SIGNATURE_KIND or not isinstance(digest, str) or not isinstance(reference, str):
        raise Refused(f"the signed payload is of type {kind!r}, not {SIGNATURE_KIND!r}")
    return reference, digest


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what an envelope's signature is over."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def subjects(repository: str, digest: str, platforms: dict[str, str]) -> list[JsonDoc]:
    """The statement's subjects: the pushed digest, and each platform's manifest under an index."""
    return [{"name": repository, "digest": {"sha256": digest.split(":")[1]}}] + [
        {"name": f"{repository}#{p}", "digest": {"sha256": d.split(":")[1]}}
        for p, d in sorted(platforms.items()) if d != digest]


def statement(subject: list[JsonDoc], predicate_type: str, predicate: object) -> bytes:
    return canonical({"_type": STATEMENT, "subject": subject, "predicateType": predicate_type,
                      "predicate": predicate})


def bundle(signer: EnvelopeSigner, payload: bytes) -> bytes:
    """A Sigstore bundle holding `payload` (an in-toto statement) in a DSSE envelope signed by
    `signer`: a key's hint, or (keyless) the certificate and the log entry."""
    signature = signer.sign(pae(IN_TOTO, payload))
    return canonical({
        "mediaType": BUNDLE,
        "verificationMaterial": signer.envelope_material(IN_TOTO, payload, signature),
        "dsseEnvelope": {"payload": _b64(payload), "payloadType": IN_TOTO,
                         "signatures": [{"sig": _b64(signature), "keyid": ""}]},
    })


@dataclass(frozen=True)
class Statement:
    predicate_type: str
    digests: frozenset[str]  # "sha256:<hex>" of every subject
    predicate: object


def open_bundle(data: bytes, trust: EnvelopeTrust) -> Statement:
    """The statement a bundle's envelope carries, once `trust` accepts its signature (and
    certificate, and log entry); Refused naming what does not hold."""
    try:
        doc = loads(data)
        envelope = doc["dsseEnvelope"]
        payload_type, payload = envelope["payloadType"], _unb64(envelope["payload"])
        signatures = [_unb64(s["sig"]) for s in envelope["signatures"]]
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise Refused("not a Sigstore bundle with a DSSE envelope") from None
    if doc.get("mediaType") != BUNDLE:
        raise Refused(f"a bundle of media type {doc.get('mediaType')!r}, not {BUNDLE}")
    if payload_type != IN_TOTO:
        raise Refused(f"the envelope carries {payload_type!r}, not an in-toto statement")
    trust.check_envelope(doc, pae(payload_type, payload), payload, signatures)
    try:
        body = loads(payload)
        kind, predicate_type = body["_type"], body["predicateType"]
        digests = frozenset(f"sha256:{s['digest']['sha256']}" for s in body["subject"])
    except (ValueError, KeyError, TypeError):
        raise Refused("the envelope's payload is not an in-toto statement") from None
    if kind != STATEMENT or not isinstance(predicate_type, str):
        raise Refused(f"the envelope's statement is of type {kind!r}, not {STATEMENT}")
    return Statement(predicate_type, digests, body.get("predicate"))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: Parsed) -> bytes:
    if not isinstance(text, str):
        raise TypeError("not base64 text")
    return base64.b64decode(text, validate=True)


@dataclass(frozen=True)
class SbomReference:
    """The full SBOM a signed statement names."""

    sha256: str  # "sha256:<hex>"
    size: int
    media_type: str


def sbom_reference(sbom: bytes, repository: str, digest: str) -> JsonDoc:
    """The signed SBOM statement's predicate (format 2): a CycloneDX document whose component is the
    image (`repository@digest`) and whose `bom` reference is the full SBOM, by sha256 and size."""
    sha = hashlib.sha256(sbom).hexdigest()
    return {
        "bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1,
        "metadata": {"component": {"type": "container", "name": repository, "version": digest,
                                   "bom-ref": f"{repository}@{digest}"},
                     "properties": [{"name": _TYPE_PROPERTY, "value": SBOM_MEDIA_TYPE},
                                    {"name": _SIZE_PROPERTY, "value": str(len(sbom))}]},
        "externalReferences": [{"type": "bom", "url": f"oci://{repository}@sha256:{sha}",
                                "comment": f"the full SBOM ({SBOM_MEDIA_TYPE}, {len(sbom)} bytes): the blob the "
                                           "image's SBOM referrer carries",
                                "hashes": [{"alg": "SHA-256", "content": sha}]}],
    }


def referenced_sbom(predicate: Parsed) -> SbomReference:
    """The full SBOM a format-2 statement's predicate names; Refused when it names none."""
    try:
        if not isinstance(predicate, dict):
            raise TypeError("not a document")
        refs = [r for r in predicate["externalReferences"] if isinstance(r, dict) and r.get("type") == "bom"]
        hashes = [h["content"] for h in refs[0]["hashes"] if isinstance(h, dict) and h.get("alg") == "SHA-256"]
        properties = {p["name"]: p["value"] for p in predicate["metadata"]["properties"] if isinstance(p, dict)}
        sha, size, media_type = hashes[0], int(properties[_SIZE_PROPERTY]), properties[_TYPE_PROPERTY]
    except (KeyError, IndexError, TypeError, ValueError):
        raise Refused("its signed statement names no full SBOM (an external reference of type `bom` with its "
                      "sha256)") from None
    if not isinstance(sha, str) or len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha) \
            or not isinstance(media_type, str) or not 0 <= size <= 1 << 30:
        raise Refused("its signed statement's SBOM reference is not a sha256, a size and a media type")
    return SbomReference(f"sha256:{sha}", size, media_type)
