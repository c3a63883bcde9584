"""Checking a keyless signature offline: `verify --signature --identity ID --issuer URL
--trusted-root trusted_root.json`. The certificate must chain to a certificate authority of the
trusted root, name the identity (its subject alternative name) and the OIDC issuer (Fulcio's
extension), and the signature must have been entered in a transparency log of the trusted root
while the certificate was valid: the entry's signed timestamp is checked with that log's key from
the file, nothing is looked up. The trusted root is Sigstore's `trusted_root.json` format."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from enginebuild.errors import UserError
from enginebuild.publish.signformat import Refused, canonical
from enginebuild.wire import JsonDoc, Parsed, loads

ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
MAX_ROOT = 1 << 20
CERTIFICATE_ANNOTATION = "dev.sigstore.cosign/certificate"
CHAIN_ANNOTATION = "dev.sigstore.cosign/chain"
BUNDLE_ANNOTATION = "dev.sigstore.cosign/bundle"


@dataclass(frozen=True)
class Authority:
    chain: list[x509.Certificate]  # as the file lists it: the issuing certificate first, the root last
    start: dt.datetime
    end: dt.datetime


@dataclass(frozen=True)
class Log:
    key: ec.EllipticCurvePublicKey
    start: dt.datetime
    end: dt.datetime


@dataclass(frozen=True)
class TrustedRoot:
    authorities: list[Authority]
    logs: dict[str, Log]  # by hex log id (sha256 of the key's DER)


def load_trusted_root(path: str) -> TrustedRoot:
    where = Path(path)
    try:
        if where.stat().st_size > MAX_ROOT:
            raise UserError(f"{path}: {where.stat().st_size} bytes is not a trusted root")
        doc = loads(where.read_bytes())
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror})") from None
    except ValueError as exc:
        raise UserError(f"{path}: not JSON ({exc})") from None
    authorities, logs = [], {}
    try:
        for n, ca in enumerate(doc["certificateAuthorities"]):
            chain = [x509.load_der_x509_certificate(base64.b64decode(c["rawBytes"], validate=True))
                     for c in ca["certChain"]["certificates"]]
            authorities.append(Authority(chain, *_valid_for(ca.get("validFor"), f"certificateAuthorities[{n}]")))
        for n, log in enumerate(doc["tlogs"]):
            der = base64.b64decode(log["publicKey"]["rawBytes"], validate=True)
            key = serialization.load_der_public_key(der)
            if not isinstance(key, ec.EllipticCurvePublicKey):
                raise UserError(f"{path}: tlogs[{n}].publicKey: only ECDSA log keys are read")
            logs[hashlib.sha256(der).hexdigest()] = Log(key, *_valid_for(log["publicKey"].get("validFor"),
                                                                          f"tlogs[{n}]"))
    except UserError:
        raise
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise UserError(f"{path}: not a Sigstore trusted root (certificateAuthorities[].certChain.certificates"
                        f"[].rawBytes, tlogs[].publicKey.rawBytes): {type(exc).__name__} {exc}") from None
    if not authorities or not logs:
        raise UserError(f"{path}: names no certificate authority or no transparency log")
    return TrustedRoot(authorities, logs)


def _valid_for(window: Parsed, where: str) -> tuple[dt.datetime, dt.datetime]:
    bounds = window or {}
    if not isinstance(bounds, dict):
        raise UserError(f"{where}.validFor: not RFC 3339 times")

    def at(key: str, default: dt.datetime) -> dt.datetime:
        text = bounds.get(key)
        if not text:
            return default
        if not isinstance(text, str):
            raise UserError(f"{where}.validFor: not RFC 3339 times")
        try:
            return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise UserError(f"{where}.validFor: not RFC 3339 times") from None

    return at("start", dt.datetime.min.replace(tzinfo=dt.UTC)), at("end", dt.datetime.max.replace(tzinfo=dt.UTC))


def identity_of(cert: x509.Certificate) -> tuple[str, str]:
    """(subject alternative name, OIDC issuer) of a Fulcio certificate."""
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        found = names.get_values_for_type(x509.UniformResourceIdentifier) + names.get_values_for_type(x509.RFC822Name)
    except x509.ExtensionNotFound:
        found = []
    issuer = ""
    for oid in (ISSUER_V2, ISSUER_V1):
        try:
            value = cert.extensions.get_extension_for_oid(oid).value
        except x509.ExtensionNotFound:
            continue
        raw = value.value if isinstance(value, x509.UnrecognizedExtension) else b""
        # v2 is a DER UTF8String (tag 12, one length byte for short values); v1 the bare text
        issuer = raw[2:].decode(errors="replace") if oid == ISSUER_V2 and raw[:1] == b"\x0c" else raw.decode(
            errors="replace")
        break
    return (found[0] if found else ""), issuer


@dataclass(frozen=True)
class IdentityTrust:
    root: TrustedRoot
    identity: str
    issuer: str

    @property
    def describe(self) -> str:
        return f"signed as {self.identity} (issuer {self.issuer}), certificate and log entry checked offline"

    def check_message(self, payload: bytes, signature: bytes, annotations: JsonDoc) -> str | None:
        """A cosign keyless signature layer: its certificate, its log entry, its signature."""
        try:
            cert = x509.load_pem_x509_certificate(str(annotations.get(CERTIFICATE_ANNOTATION, "")).encode())
            logged = loads(str(annotations.get(BUNDLE_ANNOTATION, "")))
            body = base64.b64decode(logged["Payload"]["body"], validate=True)
            entry = (body, int(logged["Payload"]["integratedTime"]), str(logged["Payload"]["logID"]),
                     int(logged["Payload"]["logIndex"]), base64.b64decode(logged["SignedEntryTimestamp"], validate=True))
        except (ValueError, KeyError, TypeError, binascii.Error):
            return "a keyless signature layer without a certificate and a log entry (not signed keylessly?)"
        try:
            self._certificate(cert, *entry)
            record = loads(body)
            spec = record["spec"]
            if record.get("kind") != "hashedrekord" or spec["data"]["hash"]["value"] != \
                    hashlib.sha256(payload).hexdigest() or base64.b64decode(spec["signature"]["content"]) != signature:
                raise Refused("the log entry is for another signature")
            _verify(cert, payload, signature)
        except Refused as exc:
            return str(exc)
        except (ValueError, KeyError, TypeError, binascii.Error):
            return "the log entry's body is not a hashedrekord"
        return None

    def check_envelope(self, document: JsonDoc, message: bytes, payload: bytes, signatures: list[bytes]) -> None:
        """A bundle's certificate and log entry; raises Refused."""
        try:
            material = document["verificationMaterial"]
            raw = (material.get("certificate") or {}).get("rawBytes") or \
                material["x509CertificateChain"]["certificates"][0]["rawBytes"]
            cert = x509.load_der_x509_certificate(base64.b64decode(raw, validate=True))
            logged = material["tlogEntries"][0]
            body = base64.b64decode(logged["canonicalizedBody"], validate=True)
            entry = (body, int(logged["integratedTime"]),
                     base64.b64decode(logged["logId"]["keyId"], validate=True).hex(), int(logged["logIndex"]),
                     base64.b64decode(logged["inclusionPromise"]["signedEntryTimestamp"], validate=True))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, binascii.Error):
            raise Refused("the bundle has no certificate and log entry (signed with a key, not keylessly?)") from None
        self._certificate(cert, *entry)
        signature = next((s for s in signatures if _verifies(cert, message, s)), None)
        if signature is None:
            raise Refused("the envelope's signature does not verify with its certificate")
        try:
            content = loads(body)["spec"]["content"]
            logged_signature = base64.b64decode(base64.b64decode(content["envelope"]["signatures"][0]["sig"]))
            logged_hash = content["payloadHash"]["value"]
        except (ValueError, KeyError, TypeError, IndexError, binascii.Error):
            raise Refused("the log entry's body is not an intoto entry") from None
        if logged_signature != signature or logged_hash != hashlib.sha256(payload).hexdigest():
            raise Refused("the log entry is for another envelope")

    def _certificate(self, cert: x509.Certificate, body: bytes, integrated: int, log_id: str, index: int,
                     timestamp: bytes) -> None:
        """The certificate chains to the trusted root, names the identity and issuer, and was valid
        when the trusted log took the entry; the entry's timestamp is signed by that log."""
        log = self.root.logs.get(log_id)
        if log is None:
            raise Refused(f"the log entry is from a log the trusted root does not name ({log_id[:16]})")
        signed = canonical({"body": base64.b64encode(body).decode(), "integratedTime": integrated,
                            "logID": log_id, "logIndex": index})
        try:
            log.key.verify(timestamp, signed, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise Refused("the log entry's signed timestamp does not verify with the trusted log's key") from None
        when = dt.datetime.fromtimestamp(integrated, dt.UTC)
        if not (cert.not_valid_before_utc <= when <= cert.not_valid_after_utc):
            raise Refused(f"signed at {when:%Y-%m-%dT%H:%M:%SZ}, outside the certificate's validity "
                          f"({cert.not_valid_before_utc:%Y-%m-%dT%H:%M:%SZ} to "
                          f"{cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ})")
        if not (log.start <= when <= log.end):
            raise Refused(f"signed at {when:%Y-%m-%dT%H:%M:%SZ}, outside the trusted log key's validity")
        if not any(self._chains(cert, ca, when) for ca in self.root.authorities):
            raise Refused("the certificate does not chain to a certificate authority of the trusted root")
        identity, issuer = identity_of(cert)
        if identity != self.identity:
            raise Refused(f"the certificate is for identity {identity!r}, not {self.identity!r}")
        if issuer != self.issuer:
            raise Refused(f"the certificate's OIDC issuer is {issuer!r}, not {self.issuer!r}")

    @staticmethod
    def _chains(cert: x509.Certificate, ca: Authority, when: dt.datetime) -> bool:
        if not (ca.start <= when <= ca.end):
            return False
        current = cert
        for issuer in ca.chain:
            try:
                current.verify_directly_issued_by(issuer)
            except (ValueError, TypeError, InvalidSignature):
                return False
            current = issuer
        return True


def _verifies(cert: x509.Certificate, data: bytes, signature: bytes) -> bool:
    try:
        _verify(cert, data, signature)
    except Refused:
        return False
    return True


def _verify(cert: x509.Certificate, data: bytes, signature: bytes) -> None:
    key = cert.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise Refused("the certificate's key is not ECDSA")
    try:
        key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise Refused("the signature does not verify with its certificate") from None
