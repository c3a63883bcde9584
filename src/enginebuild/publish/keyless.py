"""Keyless signing (Sigstore): the job's OIDC identity, a short-lived certificate from Fulcio for an
ephemeral key, and every signature entered in Rekor, whose signed entry timestamp proves it was
made inside the certificate's minutes. Nothing long-lived is kept: the key lives in this process.

The identity token is SIGSTORE_ID_TOKEN, else the GitHub Actions job's own (audience `sigstore`;
the job needs `id-token: write`). Fulcio (POST /api/v2/signingCert) and Rekor (POST
/api/v1/log/entries) default to the public-good instances; `--fulcio`/`--rekor` name others. A
simple-signing signature is entered as a `hashedrekord` 0.0.1, a DSSE envelope as an `intoto` 0.0.2.
What either service answers is checked before it is used: the certificate must be for this key,
the entry must be a signed timestamp over what was sent."""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from dataclasses import dataclass
from urllib.parse import quote

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from enginebuild.errors import UserError
from enginebuild.io.http import Http, HttpFailure
from enginebuild.publish.identity import BUNDLE_ANNOTATION, CERTIFICATE_ANNOTATION, CHAIN_ANNOTATION, identity_of
from enginebuild.publish.signformat import canonical
from enginebuild.wire import JsonDoc, loads

FULCIO = "https://fulcio.sigstore.dev"
REKOR = "https://rekor.sigstore.dev"
TOKEN_ENV = "SIGSTORE_ID_TOKEN"
MAX_ANSWER = 1 << 20


class KeylessError(UserError):
    exit_code = 1


@dataclass(frozen=True)
class LogEntry:
    """A transparency-log entry as Rekor returns it."""

    body: bytes  # the canonicalized body
    integrated_time: int
    log_id: str  # hex sha256 of the log's public key
    log_index: int
    timestamp: bytes  # the signed entry timestamp
    proof: JsonDoc | None = None

    def for_bundle(self) -> JsonDoc:
        """The entry in a Sigstore bundle (protobuf JSON)."""
        kind = loads(self.body)
        entry: JsonDoc = {
            "logIndex": str(self.log_index), "logId": {"keyId": _b64(bytes.fromhex(self.log_id))},
            "kindVersion": {"kind": kind["kind"], "version": kind["apiVersion"]},
            "integratedTime": str(self.integrated_time),
            "inclusionPromise": {"signedEntryTimestamp": _b64(self.timestamp)},
            "canonicalizedBody": _b64(self.body)}
        if self.proof:
            entry["inclusionProof"] = self.proof
        return entry

    def for_cosign(self) -> str:
        """cosign's `dev.sigstore.cosign/bundle` annotation."""
        return canonical({"SignedEntryTimestamp": _b64(self.timestamp),
                          "Payload": {"body": _b64(self.body), "integratedTime": self.integrated_time,
                                      "logIndex": self.log_index, "logID": self.log_id}}).decode()


@dataclass
class KeylessSigner:
    private: ec.EllipticCurvePrivateKey
    chain: list[x509.Certificate]  # the leaf first
    identity: str
    rekor: str
    http: Http

    @property
    def who(self) -> str:
        return self.identity

    def sign(self, data: bytes) -> bytes:
        return self.private.sign(data, ec.ECDSA(hashes.SHA256()))

    def _pem(self, cert: x509.Certificate) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    def message_annotations(self, payload: bytes, signature: bytes) -> dict[str, str]:
        entry = self._log({"apiVersion": "0.0.1", "kind": "hashedrekord", "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()}},
            "signature": {"content": _b64(signature), "publicKey": {"content": _b64(self._pem(self.chain[0]))}}}})
        return {CERTIFICATE_ANNOTATION: self._pem(self.chain[0]).decode(),
                CHAIN_ANNOTATION: b"".join(self._pem(c) for c in self.chain[1:]).decode(),
                BUNDLE_ANNOTATION: entry.for_cosign()}

    def envelope_material(self, payload_type: str, payload: bytes, signature: bytes) -> JsonDoc:
        envelope = canonical({"payload": _b64(payload), "payloadType": payload_type,
                              "signatures": [{"keyid": "", "sig": _b64(signature)}]})
        entry = self._log({"apiVersion": "0.0.2", "kind": "intoto", "spec": {"content": {
            "envelope": {"payloadType": payload_type, "payload": _b64(_b64(payload).encode()),
                         "signatures": [{"sig": _b64(_b64(signature).encode()),
                                         "publicKey": _b64(self._pem(self.chain[0]))}]},
            "hash": {"algorithm": "sha256", "value": hashlib.sha256(envelope).hexdigest()},
            "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()}}}})
        return {"certificate": {"rawBytes": _b64(self.chain[0].public_bytes(serialization.Encoding.DER))},
                "tlogEntries": [entry.for_bundle()], "timestampVerificationData": {"rfc3161Timestamps": []}}

    def _log(self, proposed: JsonDoc) -> LogEntry:
        url = f"{self.rekor}/api/v1/log/entries"
        try:
            response = self.http.request("POST", url, json=proposed)
        except HttpFailure as exc:
            raise KeylessError(f"Rekor at {self.rekor}: {exc}") from None
        if response.status_code != 201 or len(response.content) > MAX_ANSWER:
            raise KeylessError(f"Rekor at {self.rekor} refused the entry (HTTP {response.status_code}): "
                               f"{response.text[:200]}")
        try:
            (_, answer), = loads(response.content).items()
            entry = LogEntry(base64.b64decode(answer["body"], validate=True), int(answer["integratedTime"]),
                             str(answer["logID"]), int(answer["logIndex"]),
                             base64.b64decode(answer["verification"]["signedEntryTimestamp"], validate=True),
                             _proof(answer["verification"].get("inclusionProof")))
            bytes.fromhex(entry.log_id)
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
            raise KeylessError(f"Rekor at {self.rekor} answered something that is not a log entry") from None
        if loads(entry.body) != proposed:
            raise KeylessError(f"Rekor at {self.rekor} logged another entry than the one sent")
        return entry


def _proof(proof: object) -> JsonDoc | None:
    """Rekor's inclusion proof in the bundle's form (hashes as base64 bytes, numbers as strings)."""
    if not isinstance(proof, dict):
        return None
    return {"logIndex": str(int(proof["logIndex"])), "rootHash": _b64(bytes.fromhex(proof["rootHash"])),
            "treeSize": str(int(proof["treeSize"])), "hashes": [_b64(bytes.fromhex(h)) for h in proof["hashes"]],
            "checkpoint": {"envelope": str(proof["checkpoint"])}}


def identity_token(http: Http) -> str:
    """The OIDC token to sign as: SIGSTORE_ID_TOKEN, else the GitHub Actions job's."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token
    url, bearer = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_URL"), os.environ.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
    if not (url and bearer):
        raise UserError(f"--keyless needs an OIDC identity: {TOKEN_ENV}, or a GitHub Actions job granted "
                        "`id-token: write`", hint="sign with a key instead: --sign --key FILE")
    try:
        response = http.request("GET", f"{url}&audience={quote('sigstore')}",
                                headers={"Authorization": f"bearer {bearer}"})
        value = loads(response.content).get("value") if response.status_code == 200 else None
    except (HttpFailure, ValueError, AttributeError):
        value = None
    if not isinstance(value, str) or not value:
        raise KeylessError("the GitHub Actions job's OIDC token could not be had (is `id-token: write` granted?)")
    return value


def _claims(token: str) -> JsonDoc:
    try:
        part = token.split(".")[1]
        claims = loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (IndexError, ValueError, binascii.Error):
        raise UserError(f"${TOKEN_ENV}: not a JSON web token") from None
    if not isinstance(claims, dict):
        raise UserError(f"${TOKEN_ENV}: not a JSON web token")
    return claims


def keyless_signer(fulcio: str | None = None, rekor: str | None = None) -> KeylessSigner:
    """An ephemeral key and its certificate for the job's identity."""
    http = Http(attempts=3)
    fulcio, rekor = (fulcio or FULCIO).rstrip("/"), (rekor or REKOR).rstrip("/")
    token = identity_token(http)
    subject = str(_claims(token).get("email") or _claims(token).get("sub") or "")
    private = ec.generate_private_key(ec.SECP256R1())
    public_pem = private.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    request = {"credentials": {"oidcIdentityToken": token},
               "publicKeyRequest": {"publicKey": {"algorithm": "ECDSA", "content": public_pem},
                                    "proofOfPossession": _b64(private.sign(subject.encode(), ec.ECDSA(hashes.SHA256())))}}
    try:
        response = http.request("POST", f"{fulcio}/api/v2/signingCert", json=request)
    except HttpFailure as exc:
        raise KeylessError(f"Fulcio at {fulcio}: {exc}") from None
    if response.status_code not in (200, 201) or len(response.content) > MAX_ANSWER:
        raise KeylessError(f"Fulcio at {fulcio} issued no certificate (HTTP {response.status_code}): "
                           f"{response.text[:200]}")
    try:
        answer = loads(response.content)
        signed = answer.get("signedCertificateEmbeddedSct") or answer["signedCertificateDetachedSct"]
        chain = [x509.load_pem_x509_certificate(pem.encode()) for pem in signed["chain"]["certificates"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise KeylessError(f"Fulcio at {fulcio} answered something that is not a certificate chain") from None
    if not chain or chain[0].public_key().public_bytes(serialization.Encoding.PEM,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo).decode() \
            != public_pem:
        raise KeylessError(f"Fulcio at {fulcio} issued a certificate for another key")
    return KeylessSigner(private, chain, identity_of(chain[0])[0], rekor, http)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
