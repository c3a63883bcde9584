"""Compile caches beside an image in its registry: what a node's warm-up compiled, captured as one
deterministic archive, pushed as an OCI referrer of the image's digest (artifact type CACHE_TYPE)
whose annotations carry its record; signed with the image's key where one is given. A second
warm-up that compiled the same files makes the same archive and the same manifest: nothing is
pushed. `serve up` lists the image's caches, takes the one whose record is the node's in every
field, checks its signature where a key is given, and hands it to the node; one that differs is
named with the fields that differ and left."""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from enginebuild.errors import RegistryError, UserError
from enginebuild.io.store import Store
from enginebuild.oci.image import OCI_MANIFEST, canonical
from enginebuild.oci.push import Pusher
from enginebuild.oci.reference import ImageRef, parse_image_ref
from enginebuild.oci.referrers import EMPTY, EMPTY_TYPE, has_referrers_api, listed, update_fallback_index
from enginebuild.oci.registry import RegistryClient, sha256_digest
from enginebuild.publish.sign import Subject, attach_signature
from enginebuild.publish.signcheck import signature_check
from enginebuild.serving.compilecache import FIELDS, differences
from enginebuild.settings import settings
from enginebuild.trust.signkeys import KeyTrust, Signer
from enginebuild.wire import loads

CACHE_TYPE = "application/vnd.enginebuild.compile-cache.v1.tar+gzip"
PREFIX = "org.enginebuild.compile-cache."  # each record field, as an annotation of the cache's manifest
MAX_CACHE = 64 << 30


@dataclass(frozen=True)
class Pushed:
    digest: str
    sent: int  # bytes the registry did not have


@dataclass(frozen=True)
class Found:
    digest: str
    record: dict[str, str]


def pinned_image(text: str) -> ImageRef:
    try:
        ref = parse_image_ref(text)
    except ValueError as exc:
        raise UserError(f"{text}: {exc}") from None
    if ref.digest is None or "." not in ref.registry and ":" not in ref.registry and ref.registry != "localhost":
        raise UserError(f"{text}: compile caches live beside the image in its registry: give it as "
                        "REGISTRY/REPO@sha256:DIGEST (as `push` printed it)")
    return ref


def engine_args(env: dict[str, str], tensor_parallel: int, pipeline_parallel: int) -> str:
    """The engine's arguments as the record keeps them: the launcher's settings, the parallel sizes."""
    items = sorted(env.items()) + [("PARALLEL", f"tp{tensor_parallel}-pp{pipeline_parallel}")]
    return " ".join(f"{k}={v}" for k, v in items)


def push(ref: ImageRef, archive: Path, record: dict[str, str], signer: Signer | None) -> Pushed:
    """The archive as a referrer of the image (and its signature); the bytes the registry lacked."""
    client = RegistryClient()
    pusher = Pusher(client, Store(settings().home), ImageRef(ref.registry, ref.repository, None, None))
    digest = ref.digest
    assert digest is not None
    _, subject_type, body = client.manifest(ref)
    blob = _sha256(archive)
    size = archive.stat().st_size
    sent = 0
    if not client.has_blob(pusher.target, blob):
        client.upload_blob(pusher.target, blob, size, lambda: open(archive, "rb"))
        sent += size
    if not client.has_blob(pusher.target, sha256_digest(EMPTY)):
        pusher.data(EMPTY, "empty config")
        sent += len(EMPTY)
    annotations = {PREFIX + name: record.get(name, "") for name in FIELDS}
    manifest = canonical({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": CACHE_TYPE,
        "config": {"mediaType": EMPTY_TYPE, "digest": sha256_digest(EMPTY), "size": len(EMPTY)},
        "layers": [{"mediaType": CACHE_TYPE, "digest": blob, "size": size}],
        "subject": {"mediaType": subject_type, "digest": digest, "size": len(body)},
        "annotations": annotations})
    made = sha256_digest(manifest)
    there = client.head_digest(ImageRef(ref.registry, ref.repository, None, made))
    if not there:
        client.put_manifest(pusher.target, made, manifest, OCI_MANIFEST)
        sent += len(manifest)
        if not has_referrers_api(client, pusher.target, digest):
            update_fallback_index(pusher, digest, [(made, len(manifest), CACHE_TYPE, annotations)])
    if signer is not None and not there:
        attach_signature(pusher, signer, Subject(made, OCI_MANIFEST, len(manifest)),
                         has_referrers_api(client, pusher.target, made))
    return Pushed(made, sent)


def caches_of(ref: ImageRef) -> list[Found]:
    """The image's compile caches, each with the record its annotations give (the archive's own
    record is checked again on the node before anything is written)."""
    assert ref.digest is not None
    out = []
    for entry in listed(RegistryClient(), ref, ref.digest):
        if entry.get("artifactType") != CACHE_TYPE:
            continue
        notes = entry.get("annotations") or {}
        out.append(Found(str(entry["digest"]), {name: str(notes.get(PREFIX + name, "")) for name in FIELDS}))
    return out


def chosen(found: list[Found], here: dict[str, str]) -> tuple[Found | None, list[str]]:
    """The cache whose record is `here` in every field; else None and, for each other, what differs."""
    refused = []
    for each in found:
        wrong = differences(here, each.record)
        if not wrong:
            return each, []
        refused.append(f"{each.digest[:19]}: " + "; ".join(wrong))
    return None, refused


def fetched(ref: ImageRef, found: Found, trust: KeyTrust | None) -> Path:
    """The cache's archive in a temporary file, its bytes checked against the manifest's digest, its
    signature checked where a key is given (the caller removes the file)."""
    client = RegistryClient()
    where = ImageRef(ref.registry, ref.repository, None, found.digest)
    if trust is not None:
        check = signature_check(client, where, found.digest, trust)
        if not check.ok:
            raise RegistryError(f"compile cache {found.digest[:19]}: {check.detail}")
    _, _, body = client.manifest(where)
    doc = loads(body)
    layers = (doc.get("layers") if isinstance(doc, dict) else None) or []
    layer = layers[0] if len(layers) == 1 and isinstance(layers[0], dict) else {}
    blob, size = layer.get("digest"), layer.get("size")
    if layer.get("mediaType") != CACHE_TYPE or not isinstance(blob, str) or not isinstance(size, int) \
            or not 0 < size <= MAX_CACHE:
        raise RegistryError(f"compile cache {found.digest[:19]}: its manifest holds no one archive of a bounded size")
    handle = tempfile.NamedTemporaryFile(prefix="enginebuild-cache-", suffix=".tar.gz", delete=False)
    path = Path(handle.name)
    digest = hashlib.sha256()
    try:
        with handle, client.open_blob(where, blob) as response:
            left = size
            for chunk in response.iter_content(1 << 20):
                left -= len(chunk)
                if left < 0:
                    raise RegistryError(f"compile cache {found.digest[:19]}: larger than its manifest says")
                digest.update(chunk)
                handle.write(chunk)
        if "sha256:" + digest.hexdigest() != blob or left:
            raise RegistryError(f"compile cache {found.digest[:19]}: its archive does not hash to its digest")
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()
