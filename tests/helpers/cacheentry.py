"""Registry-cache entries written as another writer would write them (docs/cache.md gives the
format): a config {"kind", "key", "record"}, blobs as layers, the manifest signed by a key of
the test's choosing, by none, or with a signature that does not hold. Sent to a real registry
with the distribution API, as any client with write access could."""
from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

CONFIG_TYPE = "application/vnd.enginebuild.cache.v1+json"
LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
DOMAIN = b"enginebuild registry cache entry v1\n"


def new_key(path: Path) -> Path:
    path.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    path.chmod(0o600)
    return path


def public_text(pem: Path) -> str:
    key = serialization.load_pem_private_key(pem.read_bytes(), password=None)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "ed25519:" + base64.b64encode(raw).decode()


def _canonical(doc: object) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def put_blob(host: str, repository: str, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    start = requests.post(f"http://{host}/v2/{repository}/blobs/uploads/", timeout=30)
    start.raise_for_status()
    location = start.headers["Location"]
    location = location if location.startswith("http") else f"http://{host}{location}"
    joiner = "&" if "?" in location else "?"
    requests.put(f"{location}{joiner}digest={digest}", data=data, timeout=60).raise_for_status()
    return digest


def put_entry(host: str, repository: str, tag: str, kind: str, record: object,
              blobs: list[tuple[str, int, str]], *, key: Path | None, key_in_config: str | None = None,
              break_signature: bool = False) -> dict:
    """Write CACHE:TAG. `blobs`: (digest, size, media type) of blobs already in the repository
    (their sizes as the entry states them); `key`: the PEM that signs it (None: unsigned)."""
    config = _canonical({"kind": kind, "key": key_in_config or tag, "record": record})
    config_digest = put_blob(host, repository, config)
    doc: dict = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                 "artifactType": CONFIG_TYPE,
                 "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": len(config)},
                 "layers": [{"mediaType": t, "digest": d, "size": s} for d, s, t in blobs]}
    if key is not None:
        private = serialization.load_pem_private_key(key.read_bytes(), password=None)
        lines = [tag, f"{config_digest} {len(config)} {CONFIG_TYPE}"] + [f"{d} {s} {t}" for d, s, t in blobs]
        signature = private.sign(DOMAIN + "\n".join(lines).encode())
        if break_signature:
            signature = bytes([signature[0] ^ 1]) + signature[1:]
        doc["annotations"] = {"org.enginebuild.cache.signature": base64.b64encode(signature).decode(),
                              "org.enginebuild.cache.signer": public_text(key)}
    body = _canonical(doc)
    requests.put(f"http://{host}/v2/{repository}/manifests/{tag}", data=body, timeout=30,
                 headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"}).raise_for_status()
    return doc


def get_entry(host: str, repository: str, tag: str) -> tuple[dict, dict]:
    """(manifest, config) of an entry as the registry holds it."""
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    doc = requests.get(f"http://{host}/v2/{repository}/manifests/{tag}", headers=accept, timeout=30).json()
    config = requests.get(f"http://{host}/v2/{repository}/blobs/{doc['config']['digest']}", timeout=30).json()
    return doc, config
