"""A client for the OCI distribution API: manifests, indexes, blobs, uploads, the token flow.

Speaks to ghcr.io, nvcr.io, Docker Hub and any distribution registry: a 401 with a
`Bearer` challenge is answered by fetching a token from the realm for exactly the scope
the registry asked for; a `Basic` challenge with the stored credentials. Every manifest
served is hashed: a `Docker-Content-Digest` that disagrees with the bytes is an error.
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, Protocol

from enginebuild.core.platforms import Platform
from enginebuild.errors import RegistryError, RegistryUnreachable
from enginebuild.io.http import MAX_WAIT_S, RETRY_STATUS, Http, HttpFailure, retry_after
from enginebuild.oci.credentials import registry_credentials
from enginebuild.oci.reference import ImageRef, is_local_registry
from enginebuild.settings import settings
from enginebuild.wire import JsonDoc, loads, loads_object

if TYPE_CHECKING:
    import requests

INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")
ACCEPT = ", ".join(INDEX_TYPES + MANIFEST_TYPES)
UPLOAD_ATTEMPTS = 5
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    scheme, _, rest = header.strip().partition(" ")
    return scheme.lower(), dict(_CHALLENGE_PARAM.findall(rest))


def scheme_of(registry: str) -> str:
    return "http" if is_local_registry(registry) or registry in settings().insecure_registries else "https"


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class BadManifest(RegistryError):
    """What a registry served as a manifest cannot be read (not JSON, not an object, nested too deep)."""


class RegistryApi(Protocol):
    """What pushing an image (and attaching to it) asks of a registry: `RegistryClient` speaks the
    distribution API to a real one; the tests of the build loop in process give one in memory
    (tests/helpers/memregistry.py)."""

    def manifest(self, ref: ImageRef, accept: str = ...) -> tuple[str, str, bytes]: ...
    def platform_manifest(self, ref: ImageRef, platform: str) -> tuple[str, JsonDoc, str | None]: ...
    def head_digest(self, ref: ImageRef) -> str | None: ...
    def put_manifest(self, ref: ImageRef, reference: str, body: bytes, media_type: str) -> str: ...
    def has_blob(self, ref: ImageRef, digest: str) -> bool: ...
    def blob_size(self, ref: ImageRef, digest: str) -> int | None: ...
    def open_blob(self, ref: ImageRef, digest: str) -> requests.Response: ...
    def mount_blob(self, ref: ImageRef, digest: str, source_repository: str) -> bool: ...
    def upload_blob(self, ref: ImageRef, digest: str, size: int, opener: Callable[[], IO[bytes]]) -> None: ...
    def referrers(self, ref: ImageRef, digest: str) -> JsonDoc | None: ...


class RegistryClient:
    def __init__(self, http: Http | None = None):
        self.http = http or Http()
        self._tokens: dict[tuple[str, str], str] = {}

    def base_url(self, registry: str) -> str:
        return f"{scheme_of(registry)}://{registry}"

    def _url(self, ref: ImageRef, kind: str, reference: str) -> str:
        return f"{self.base_url(ref.registry)}/v2/{ref.repository}/{kind}/{reference}"

    def request(self, ref: ImageRef, method: str, url: str, *, body: Callable[[], Any] | None = None,
                attempts: int | None = None, **kwargs: Any) -> requests.Response:
        """Send a request, answering at most one auth challenge (a body is re-opened for the retry)."""
        headers = dict(kwargs.pop("headers", {}))
        key = (ref.registry, ref.repository)
        if key in self._tokens:
            headers["Authorization"] = self._tokens[key]
        try:
            response = self.http.request(method, url, headers=headers, body=body, attempts=attempts, **kwargs)
            if response.status_code != 401:
                return response
            challenge = response.headers.get("WWW-Authenticate", "")
            response.close()
            headers["Authorization"] = self._answer(ref, challenge)
            self._tokens[key] = headers["Authorization"]
            response = self.http.request(method, url, headers=headers, body=body, attempts=attempts, **kwargs)
        except HttpFailure as exc:
            answer = (f"HTTP {exc.response.status_code} {_error_text(exc.response)}".strip()
                      if exc.response is not None else None)
            raise RegistryUnreachable(f"{ref.registry}: {exc}", kind=exc.kind, hint=exc.hint, answer=answer) from None
        if response.status_code == 401:
            raise RegistryError(f"{ref.registry} refused the credentials for {ref.repository} (HTTP 401)",
                                hint=f"log in with `docker login {ref.registry}`")
        return response

    def _answer(self, ref: ImageRef, challenge: str) -> str:
        scheme, params = parse_challenge(challenge)
        creds = registry_credentials(ref.registry)
        if scheme == "basic":
            if not creds:
                raise RegistryError(f"{ref.registry} needs credentials for {ref.repository}",
                                    hint=f"log in with `docker login {ref.registry}`")
            return "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
        if scheme != "bearer" or "realm" not in params:
            raise RegistryError(f"{ref.registry} sent an authentication challenge enginebuild cannot answer: {scheme!r}")
        query = {"service": params["service"]} if "service" in params else {}
        query["scope"] = params.get("scope") or f"repository:{ref.repository}:pull"
        try:
            response = self.http.request("GET", params["realm"], params=query, auth=tuple(creds) if creds else None)
        except HttpFailure as exc:
            raise RegistryError(f"token service {params['realm']}: {exc}", hint=exc.hint) from None
        if response.status_code != 200:
            raise RegistryError(f"token service {params['realm']} answered HTTP {response.status_code} "
                                f"for scope {query['scope']}",
                                hint=f"check access to {ref.repository}; log in with `docker login {ref.registry}`")
        try:
            body = loads(response.content)
            token = body.get("token") or body.get("access_token")
        except ValueError:
            token = None
        if not token:
            raise RegistryError(f"token service {params['realm']} returned no token")
        return f"Bearer {token}"

    # -- manifests -----------------------------------------------------------------------
    def manifest(self, ref: ImageRef, accept: str = ACCEPT) -> tuple[str, str, bytes]:
        """(digest, media type, body) of a tag's or digest's manifest, verified against the bytes served."""
        reference = ref.digest or ref.tag or "latest"
        response = self.request(ref, "GET", self._url(ref, "manifests", reference), headers={"Accept": accept})
        if response.status_code == 404:
            raise RegistryError(f"{ref}: no such manifest in {ref.registry}", hint="check the repository and tag")
        if response.status_code == 403:
            raise RegistryError(f"{ref}: access denied by {ref.registry} (HTTP 403)",
                                hint="your credentials lack pull access to this repository")
        if response.status_code != 200:
            raise RegistryError(f"{ref}: {ref.registry} answered HTTP {response.status_code}")
        body = response.content
        actual = sha256_digest(body)
        claimed = response.headers.get("Docker-Content-Digest")
        if claimed and claimed != actual:
            raise RegistryError(f"{ref}: registry claims digest {claimed} but the manifest it served hashes to {actual}",
                                hint="a proxy or registry is corrupting responses; nothing was recorded")
        if ref.digest and ref.digest != actual:
            raise RegistryError(f"{ref}: served manifest hashes to {actual}, not the pinned {ref.digest}")
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        try:
            media_type = str(loads_object(body).get("mediaType") or media_type)
        except ValueError as exc:
            raise BadManifest(f"{ref}: the manifest is not a JSON document that can be read ({exc})") from None
        return actual, media_type, body

    def platform_manifest(self, ref: ImageRef, platform: str) -> tuple[str, JsonDoc, str | None]:
        """(manifest digest, manifest, index digest or None) of `platform` under a tag or digest."""
        digest, media_type, body = self.manifest(ref)
        doc = loads(body)
        if media_type not in INDEX_TYPES and "manifests" not in doc:
            return digest, doc, None
        wanted = Platform.parse(platform)
        for entry in doc.get("manifests", []):
            if wanted.named_by(entry.get("platform") or {}):
                sub = ImageRef(ref.registry, ref.repository, None, entry["digest"])
                sub_digest, _, sub_body = self.manifest(sub)
                return sub_digest, loads(sub_body), digest
        found = sorted(f"{(e.get('platform') or {}).get('os')}/{(e.get('platform') or {}).get('architecture')}"
                       for e in doc.get("manifests", []))
        raise RegistryError(f"{ref} has no image for {platform} (it has: {', '.join(found) or 'none'})")

    def head_digest(self, ref: ImageRef) -> str | None:
        """The Docker-Content-Digest a HEAD reports for a tag, or None when it does not exist."""
        url = self._url(ref, "manifests", ref.digest or ref.tag or "latest")
        response = self.request(ref, "HEAD", url, headers={"Accept": ACCEPT})
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise RegistryError(f"HEAD {ref}: {ref.registry} answered HTTP {response.status_code}")
        return response.headers.get("Docker-Content-Digest")

    def tags(self, ref: ImageRef) -> list[str]:
        """Every tag of the repository (the distribution API's tags/list, followed page by page)."""
        out: list[str] = []
        url: str | None = f"{self.base_url(ref.registry)}/v2/{ref.repository}/tags/list?n=1000"
        while url:
            response = self.request(ref, "GET", url)
            if response.status_code == 404:
                return out
            if response.status_code != 200:
                raise RegistryError(f"tags of {ref.name}: {ref.registry} answered HTTP {response.status_code}")
            out += list(loads(response.content).get("tags") or [])
            link = response.headers.get("Link", "")
            url = self.base_url(ref.registry) + link.split(";")[0].strip("<> ") if link.startswith("<") else None
        return out

    def delete_manifest(self, ref: ImageRef, digest: str) -> None:
        """DELETE a manifest by digest (its tags go with it); a registry that does not allow
        deletes (HTTP 405) is named."""
        response = self.request(ref, "DELETE", self._url(ref, "manifests", digest))
        if response.status_code not in (200, 202, 404):
            raise RegistryError(f"{ref.name}@{digest[:19]}: the registry refused the delete (HTTP "
                                f"{response.status_code}): {_error_text(response)}",
                                hint="the registry must allow deletes (distribution: storage.delete.enabled)")

    def put_manifest(self, ref: ImageRef, reference: str, body: bytes, media_type: str) -> str:
        digest = sha256_digest(body)
        response = self.request(ref, "PUT", self._url(ref, "manifests", reference), body=lambda: body,
                                headers={"Content-Type": media_type})
        if response.status_code not in (200, 201):
            raise RegistryError(f"{ref.name}:{reference}: the registry refused the manifest "
                                f"(HTTP {response.status_code}): {_error_text(response)}")
        claimed = response.headers.get("Docker-Content-Digest")
        if claimed and claimed != digest:
            raise RegistryError(f"{ref.name}:{reference}: the registry answered digest {claimed} for a manifest "
                                f"that hashes to {digest}; nothing recorded")
        return digest

    # -- blobs ---------------------------------------------------------------------------
    def has_blob(self, ref: ImageRef, digest: str) -> bool:
        return self.blob_size(ref, digest) is not None

    def blob_size(self, ref: ImageRef, digest: str) -> int | None:
        """The size the registry gives for a blob it holds (-1 when it names none: a redirect, a
        proxy that answers a HEAD with no length), None when it holds none."""
        response = self.request(ref, "HEAD", self._url(ref, "blobs", digest))
        if response.status_code in (200, 307):
            length = response.headers.get("Content-Length", "")
            return int(length) if length.isdigit() and int(length) > 0 and response.status_code == 200 else -1
        if response.status_code == 404:
            return None
        raise RegistryError(f"HEAD blob {digest[:19]} in {ref.name}: HTTP {response.status_code}")

    def open_blob(self, ref: ImageRef, digest: str) -> requests.Response:
        response = self.request(ref, "GET", self._url(ref, "blobs", digest), stream=True)
        if response.status_code != 200:
            raise RegistryError(f"blob {digest[:19]} of {ref.name}: HTTP {response.status_code}")
        return response

    def read_blob(self, ref: ImageRef, digest: str, limit: int = 1 << 24) -> bytes:
        with self.open_blob(ref, digest) as response:
            data = response.raw.read(limit + 1, decode_content=True)
        if len(data) > limit:
            raise RegistryError(f"blob {digest[:19]} of {ref.name} is larger than expected")
        if sha256_digest(data) != digest:
            raise RegistryError(f"blob {digest[:19]} of {ref.name} does not hash to its digest")
        return bytes(data)

    def mount_blob(self, ref: ImageRef, digest: str, source_repository: str) -> bool:
        """Link a blob another repository of the same registry holds into `ref`'s (a cross-repository
        mount: no byte sent). False when the registry did not (it may open an upload session
        instead, which is cancelled; it may not let this client read the other repository): the
        caller uploads then."""
        url = (f"{self.base_url(ref.registry)}/v2/{ref.repository}/blobs/uploads/"
               f"?mount={digest}&from={source_repository}")
        try:
            response = self.request(ref, "POST", url, headers={"Content-Length": "0"}, attempts=1)
        except (RegistryError, RegistryUnreachable, HttpFailure):
            return False
        if response.status_code == 201:
            return True
        location = response.headers.get("Location", "") if response.status_code == 202 else ""
        if location:
            try:
                self.request(ref, "DELETE", self.base_url(ref.registry) + location if location.startswith("/")
                             else location, attempts=1)
            except (RegistryError, RegistryUnreachable, HttpFailure):
                pass
        return False

    def upload_blob(self, ref: ImageRef, digest: str, size: int, opener: Callable[[], IO[bytes]]) -> None:
        """Upload a blob in one PUT (monolithic); the registry checks its digest.

        A cut connection or an overloaded registry starts the upload over: a new upload session
        and the source opened again from its first byte (a session that took part of a body
        would append the rest to it). Bounded in attempts and in total time; the error names
        the registry's last answer."""
        deadline = time.monotonic() + settings().upload_deadline_s
        last = "no answer"
        for attempt in range(UPLOAD_ATTEMPTS):
            try:
                self._upload_once(ref, digest, size, opener)
                return
            except _UploadAgain as again:
                last = str(again)
                wait = min(MAX_WAIT_S, again.wait if again.wait is not None else settings().http_backoff_s * 2**attempt)
                if attempt + 1 == UPLOAD_ATTEMPTS or time.monotonic() + wait > deadline:
                    break
                self.http.log(f"  upload of {digest[:19]} to {ref.registry}: {last}; starting over in {wait:.1f}s "
                              f"(attempt {attempt + 2} of {UPLOAD_ATTEMPTS})")
                time.sleep(wait)
        raise RegistryError(f"{ref.name}: upload of blob {digest[:19]} failed after {attempt + 1} attempt(s); "
                            f"the registry's last answer: {last}",
                            hint="the registry or the network kept failing: run the push again later")

    def _once(self, ref: ImageRef, method: str, url: str, **kwargs: Any) -> requests.Response:
        """One request of an upload: a failure a fresh upload can fix raises _UploadAgain."""
        try:
            response = self.request(ref, method, url, attempts=1, **kwargs)
        except RegistryUnreachable as exc:
            if exc.kind in ("dns", "refused"):
                raise
            raise _UploadAgain(exc.answer or exc.message) from None
        if response.status_code in RETRY_STATUS:
            raise _UploadAgain(f"HTTP {response.status_code} {_error_text(response)}", retry_after(response))
        return response

    def _upload_once(self, ref: ImageRef, digest: str, size: int, opener: Callable[[], IO[bytes]]) -> None:
        start = self._once(ref, "POST", f"{self.base_url(ref.registry)}/v2/{ref.repository}/blobs/uploads/",
                           headers={"Content-Length": "0"})
        if start.status_code not in (202, 201):
            raise RegistryError(f"{ref.name}: the registry refused to start an upload (HTTP {start.status_code}): "
                                f"{_error_text(start)}", hint="check push access (`docker login`)")
        if start.status_code == 201:
            return
        location = start.headers.get("Location", "")
        if location.startswith("/"):
            location = self.base_url(ref.registry) + location
        separator = "&" if "?" in location else "?"
        put = self._once(ref, "PUT", f"{location}{separator}digest={digest}", body=opener,
                         headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)})
        if put.status_code not in (201, 204):
            raise RegistryError(f"{ref.name}: upload of blob {digest[:19]} failed (HTTP {put.status_code}): "
                                f"{_error_text(put)}")

    def referrers(self, ref: ImageRef, digest: str) -> JsonDoc | None:
        """The referrers index of a manifest, or None when the registry has no referrers API."""
        response = self.request(ref, "GET", self._url(ref, "referrers", digest),
                                headers={"Accept": INDEX_TYPES[0]})
        if response.status_code == 200 and response.headers.get("Content-Type", "").startswith(INDEX_TYPES[0]):
            return dict(loads(response.content))
        return None


class _UploadAgain(Exception):
    """One upload attempt failed in a way a fresh attempt can fix."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


def _error_text(response: requests.Response) -> str:
    try:
        errors = loads(response.content).get("errors") or []
        return "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors) or response.text[:200]
    except ValueError:
        return response.text[:200]
