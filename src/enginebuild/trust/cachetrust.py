"""Who the registry cache trusts: every entry is signed by the key of the machine (or CI job)
that wrote it, and an entry is taken only when a key this machine trusts signed it.

A key is Ed25519. The signing key is ENGINEBUILD_CACHE_KEY (a PEM file, or the PEM text itself:
a CI secret), else this store's own key (`keys/cache-signing.pem` in ENGINEBUILD_HOME, made on the
first push, mode 0600). Trusted are the signing key's public half, the keys listed under
`cache.trust` in enginebuild.yaml and those in ENGINEBUILD_CACHE_TRUST, each written
`ed25519:BASE64` (32 bytes). What is signed is the entry's manifest without its annotations: the
tag, the config's digest and every blob's digest, size and type (the config names the key and
holds the record; the registry serves each blob by its digest, and the reader hashes it). The
signature and the signer's public key travel as two annotations of that manifest. The private
key is never printed, recorded or sent.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from enginebuild.errors import UserError
from enginebuild.io.files import write_atomic
from enginebuild.settings import settings
from enginebuild.trust.keymaterial import from_variable, read_key_file
from enginebuild.wire import JsonDoc

PREFIX = "ed25519:"
SIGNATURE = "org.enginebuild.cache.signature"  # annotations of a cache entry's manifest
SIGNER = "org.enginebuild.cache.signer"
DOMAIN = b"enginebuild registry cache entry v1\n"
OWN_KEY = Path("keys") / "cache-signing.pem"


@dataclass(frozen=True)
class PublicKey:
    raw: bytes  # the 32 bytes of an Ed25519 public key

    @property
    def text(self) -> str:
        return PREFIX + base64.b64encode(self.raw).decode()

    @property
    def short(self) -> str:
        """How messages name the key: its type and the start of its digest."""
        return f"{PREFIX}{hashlib.sha256(self.raw).hexdigest()[:16]}"

    def verifies(self, signature: bytes, message: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True


def parse_public_key(text: str, where: str) -> PublicKey:
    """`ed25519:BASE64` (32 bytes), as `cache.trust` and ENGINEBUILD_CACHE_TRUST write a key."""
    value = text.strip()
    try:
        raw = base64.b64decode(value.removeprefix(PREFIX), validate=True) if value.startswith(PREFIX) else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise UserError(f"{where}: {value[:60]!r} is not a cache key",
                        hint="write a key as `ed25519:` and the base64 of its 32 bytes (`doctor` prints this "
                             "machine's)")
    return PublicKey(raw)


def public_key_of(value: str | None) -> PublicKey | None:
    """A signer's public key as an entry's annotation carries it, or None when it is not one."""
    try:
        return parse_public_key(value, "") if isinstance(value, str) and len(value) < 100 else None
    except UserError:
        return None


class SigningKey:
    def __init__(self, private: Ed25519PrivateKey, origin: str):
        self._private, self.origin = private, origin
        self.public = PublicKey(private.public_key().public_bytes(serialization.Encoding.Raw,
                                                                    serialization.PublicFormat.Raw))

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)


def _from_pem(data: bytes, origin: str, der: bytes = b"") -> SigningKey:
    try:
        private = (serialization.load_der_private_key(der, password=None) if der
                   else serialization.load_pem_private_key(data, password=None))
    except (ValueError, TypeError, UnsupportedAlgorithm):
        private = None
    if not isinstance(private, Ed25519PrivateKey):
        raise UserError(f"{origin}: not an unencrypted Ed25519 private key in PEM form",
                        hint="make one with `openssl genpkey -algorithm ed25519` (the value is never printed)")
    return SigningKey(private, origin)


def signing_key(home: Path, *, make: bool) -> SigningKey | None:
    """ENGINEBUILD_CACHE_KEY's key, else this store's own (made now when `make`; else None when
    there is none yet)."""
    given = settings().cache_key
    if given:
        material = from_variable("ENGINEBUILD_CACHE_KEY", given)
        return _from_pem(material.data, material.where, material.der)
    own = Path(home) / OWN_KEY
    if own.is_file():
        return _from_pem(read_key_file(own, str(own)), str(own))
    if not make:
        return None
    pem = Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption())
    own.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(own.parent, 0o700)  # the key's folder is this user's alone before the key is written
    write_atomic(own, pem, mode=0o600)
    return _from_pem(read_key_file(own, str(own)), str(own))


@dataclass(frozen=True)
class Trust:
    """The keys whose entries this machine takes."""

    keys: frozenset[PublicKey]

    def trusts(self, key: PublicKey | None) -> bool:
        return key is not None and key in self.keys


def trust(home: Path, listed: tuple[str, ...]) -> Trust:
    """The signing key's public half (when there is one), the keys enginebuild.yaml lists
    (`listed`, already parsed there) and ENGINEBUILD_CACHE_TRUST's."""
    keys = {parse_public_key(text, "enginebuild.yaml: cache.trust") for text in listed}
    keys |= {parse_public_key(text, "ENGINEBUILD_CACHE_TRUST") for text in settings().cache_trust}
    own = signing_key(home, make=False)
    if own is not None:
        keys.add(own.public)
    return Trust(frozenset(keys))


def message(tag: str, manifest: JsonDoc) -> bytes:
    """What an entry's signature covers: its tag, its config's and blobs' descriptors."""
    lines = [tag, _descriptor(manifest.get("config"))]
    lines += [_descriptor(layer) for layer in manifest.get("layers") or ()]
    return DOMAIN + "\n".join(lines).encode()


def _descriptor(doc: object) -> str:
    if not isinstance(doc, dict):
        return "-"
    return f"{doc.get('digest')} {doc.get('size')} {doc.get('mediaType')}"


def signed(key: SigningKey, tag: str, manifest: JsonDoc) -> dict[str, str]:
    """The annotations that carry `key`'s signature of the entry."""
    return {SIGNATURE: base64.b64encode(key.sign(message(tag, manifest))).decode(), SIGNER: key.public.text}


def signer(tag: str, manifest: JsonDoc) -> tuple[PublicKey | None, bool]:
    """(the key the entry says signed it, whether its signature holds)."""
    notes = manifest.get("annotations")
    if not isinstance(notes, dict):
        return None, False
    key = public_key_of(notes.get(SIGNER))
    text = notes.get(SIGNATURE)
    if key is None or not isinstance(text, str) or len(text) > 200:
        return key, False
    try:
        signature = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return key, False
    return key, key.verifies(signature, message(tag, manifest))
