"""A registry in memory, for the push of the build loop run in process (tests/test_build_loop.py):
blobs by digest, each uploaded blob read whole and hashed against its digest and size (a mismatch
refused, as a registry refuses it); manifests by digest, tags, a mount from another repository of
it; no referrers API (so attachments go by the OCI referrers tag scheme, as with distribution 2.8)."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from enginebuild.errors import RegistryError
from enginebuild.oci.reference import ImageRef
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    import requests

    from enginebuild.oci.registry import RegistryApi


class MemoryRegistry:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}  # digest: bytes (one store for every repository)
        self.repos: dict[str, set[str]] = {}  # repository: the blob digests it holds
        self.manifests: dict[str, dict[str, tuple[str, bytes]]] = {}  # repository: {digest: (type, body)}
        self.tags: dict[str, dict[str, str]] = {}  # repository: {tag: digest}
        self.uploads = 0

    def _digest(self, ref: ImageRef) -> str | None:
        if ref.digest:
            return ref.digest if ref.digest in self.manifests.get(ref.repository, {}) else None
        return self.tags.get(ref.repository, {}).get(ref.tag or "latest")

    def manifest(self, ref: ImageRef, accept: str = "") -> tuple[str, str, bytes]:
        digest = self._digest(ref)
        if digest is None:
            raise RegistryError(f"{ref}: no such manifest in memory")
        media_type, body = self.manifests[ref.repository][digest]
        return digest, media_type, body

    def platform_manifest(self, ref: ImageRef, platform: str) -> tuple[str, JsonDoc, str | None]:
        raise RegistryError("a registry in memory serves no base image")

    def head_digest(self, ref: ImageRef) -> str | None:
        return self._digest(ref)

    def put_manifest(self, ref: ImageRef, reference: str, body: bytes, media_type: str) -> str:
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        doc = json.loads(body)
        for blob in [doc.get("config") or {}, *(doc.get("layers") or [])]:  # a manifest names only blobs held
            if blob and blob["digest"] not in self.repos.get(ref.repository, set()):
                raise RegistryError(f"{ref.repository}: manifest names blob {blob['digest'][:19]} it does not hold")
        self.manifests.setdefault(ref.repository, {})[digest] = (media_type, body)
        if not reference.startswith("sha256:"):
            self.tags.setdefault(ref.repository, {})[reference] = digest
        return digest

    def has_blob(self, ref: ImageRef, digest: str) -> bool:
        return digest in self.repos.get(ref.repository, set())

    def blob_size(self, ref: ImageRef, digest: str) -> int | None:
        return len(self.blobs[digest]) if self.has_blob(ref, digest) else None

    def open_blob(self, ref: ImageRef, digest: str) -> requests.Response:
        raise RegistryError("a registry in memory serves no blob stream")

    def mount_blob(self, ref: ImageRef, digest: str, source_repository: str) -> bool:
        if digest not in self.repos.get(source_repository, set()):
            return False
        self.repos.setdefault(ref.repository, set()).add(digest)
        return True

    def upload_blob(self, ref: ImageRef, digest: str, size: int, opener: Callable[[], IO[bytes]]) -> None:
        stream = opener()
        try:
            data = stream.read()
        finally:
            getattr(stream, "close", lambda: None)()
        if len(data) != size or "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            raise RegistryError(f"blob {digest[:19]}: {len(data)} bytes that do not hash to it")
        self.blobs[digest] = data
        self.repos.setdefault(ref.repository, set()).add(digest)
        self.uploads += 1

    def referrers(self, ref: ImageRef, digest: str) -> JsonDoc | None:
        return None


def _is_a_registry(fake: MemoryRegistry) -> RegistryApi:
    return fake  # mypy over the helpers (tests/test_architecture.py) holds the fake to the protocol
