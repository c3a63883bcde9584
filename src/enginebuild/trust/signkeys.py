"""Image signing keys: ECDSA P-256, the key type cosign makes and checks.

The private key is a PEM file (`push --sign --key FILE`) or ENGINEBUILD_SIGNING_KEY (a path, or the
PEM text itself: a CI secret); an encrypted PKCS#8 key takes its password from
ENGINEBUILD_SIGNING_KEY_PASSWORD. It is never printed, recorded or sent: errors name the file or
the variable, never its text. A public key is a PEM SubjectPublicKeyInfo (`openssl ec -pubout`,
cosign's `cosign.pub`); its id is the sha256 of its DER form, which bundles carry as their hint.
Signatures are deterministic (RFC 6979): the same key signs the same bytes the same way, so a
push made twice attaches the same signature once."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from enginebuild.errors import UserError
from enginebuild.trust.keymaterial import KeyMaterial, from_variable, read_key_file
from enginebuild.wire import JsonDoc

KEY_ENV = "ENGINEBUILD_SIGNING_KEY"
PASSWORD_ENV = "ENGINEBUILD_SIGNING_KEY_PASSWORD"
_ALGORITHM = ec.ECDSA(hashes.SHA256(), deterministic_signing=True)
_HOW = ("make one with `openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt "
        "-out cosign.key` and its public half with `openssl ec -in cosign.key -pubout -out cosign.pub`")


class Refused(Exception):
    """A signed document that does not hold; the message is the reason, for the user."""


@dataclass(frozen=True)
class PublicKey:
    key: ec.EllipticCurvePublicKey

    @property
    def der(self) -> bytes:
        return self.key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)

    @property
    def pem(self) -> str:
        return self.key.public_bytes(serialization.Encoding.PEM,
                                     serialization.PublicFormat.SubjectPublicKeyInfo).decode()

    @property
    def keyid(self) -> str:
        return hashlib.sha256(self.der).hexdigest()

    def verifies(self, data: bytes, signature: bytes) -> bool:
        try:
            self.key.verify(signature, data, _ALGORITHM)
        except (InvalidSignature, ValueError):
            return False
        return True


@dataclass(frozen=True)
class KeyTrust:
    """What `verify --signature --key` accepts: signatures this public key made."""

    key: PublicKey

    @property
    def describe(self) -> str:
        return f"signed by key {self.key.keyid[:16]}"

    def check_message(self, payload: bytes, signature: bytes, annotations: dict[str, object]) -> str | None:
        if self.key.verifies(payload, signature):
            return None
        return f"the signature does not verify with key {self.key.keyid[:16]} (another key, or changed bytes)"

    def check_envelope(self, document: JsonDoc, message: bytes, payload: bytes, signatures: list[bytes]) -> None:
        if not any(self.key.verifies(message, s) for s in signatures):
            raise Refused("the envelope's signature does not verify")


@dataclass(frozen=True)
class Signer:
    private: ec.EllipticCurvePrivateKey

    @property
    def public(self) -> PublicKey:
        return PublicKey(self.private.public_key())

    def sign(self, data: bytes) -> bytes:
        """An ASN.1 DER ECDSA signature over sha256(data)."""
        return self.private.sign(data, _ALGORITHM)

    @property
    def who(self) -> str:
        return self.public.keyid

    def message_annotations(self, payload: bytes, signature: bytes) -> dict[str, str]:
        return {}  # the signature alone: the verifier holds the public key

    def envelope_material(self, payload_type: str, payload: bytes, signature: bytes) -> JsonDoc:
        return {"publicKey": {"hint": self.public.keyid}, "tlogEntries": [],
                "timestampVerificationData": {"rfc3161Timestamps": []}}

    def __repr__(self) -> str:  # never the key itself
        return f"Signer(keyid={self.public.keyid[:12]})"


def _p256(key: object, where: str) -> None:
    if not isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        raise UserError(f"{where}: not an ECDSA key ({type(key).__name__.removeprefix('_')}); images are signed with "
                        "ECDSA P-256", hint=_HOW)
    if not isinstance(key.curve, ec.SECP256R1):
        raise UserError(f"{where}: an ECDSA key on {key.curve.name}, not P-256 (prime256v1)", hint=_HOW)


def load_signer(path: str | None) -> Signer:
    """The signing key of `--key PATH`, else of ENGINEBUILD_SIGNING_KEY."""
    if path:
        given = KeyMaterial(path, data=read_key_file(Path(path), path))
    else:
        value = os.environ.get(KEY_ENV, "")
        if not value.strip():
            raise UserError(f"--sign needs a key: --key FILE or {KEY_ENV} (a PEM file, or the PEM text)", hint=_HOW)
        given = from_variable(KEY_ENV, value)
    where, text = given.where, given.data
    if b"ENCRYPTED SIGSTORE PRIVATE KEY" in text or b"ENCRYPTED COSIGN PRIVATE KEY" in text:
        raise UserError(f"{where}: cosign's encrypted key format is not read",
                        hint="give the key as PKCS#8 PEM (with ENGINEBUILD_SIGNING_KEY_PASSWORD if encrypted)")
    password = os.environ.get(PASSWORD_ENV)
    secret = password.encode() if password else None
    try:
        key = (serialization.load_der_private_key(given.der, secret) if given.der
               else serialization.load_pem_private_key(text, secret))
    except TypeError:
        raise UserError(f"{where}: the key is encrypted", hint=f"give its password in {PASSWORD_ENV}") from None
    except (ValueError, UnsupportedAlgorithm):
        raise UserError(f"{where}: not a PEM private key that can be read (a wrong password, or not a key)",
                        hint=_HOW) from None
    _p256(key, where)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return Signer(key)


def load_public(path: str) -> PublicKey:
    text = read_key_file(Path(path), path)
    try:
        key = serialization.load_pem_public_key(text)
    except (ValueError, UnsupportedAlgorithm):
        raise UserError(f"{path}: not a PEM public key (-----BEGIN PUBLIC KEY-----)", hint=_HOW) from None
    _p256(key, path)
    assert isinstance(key, ec.EllipticCurvePublicKey)
    return PublicKey(key)

