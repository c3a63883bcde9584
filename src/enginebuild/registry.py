"""A client for the OCI distribution API: manifest digests with the registry token flow.

Speaks to ghcr.io, nvcr.io, Docker Hub and any distribution registry: a 401 with a
`Bearer` challenge is answered by fetching a token from the realm for exactly the
scope the registry asked for; a `Basic` challenge with the stored credentials.
"""
from __future__ import annotations

import base64
import hashlib
import os
import re

from enginebuild.credentials import registry_credentials
from enginebuild.errors import RegistryError
from enginebuild.http import Http, HttpFailure
from enginebuild.reference import ImageRef, is_local_registry

MANIFEST_TYPES = ", ".join([
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


def parse_challenge(header: str) -> tuple:
    scheme, _, rest = header.strip().partition(" ")
    return scheme.lower(), dict(_CHALLENGE_PARAM.findall(rest))


def _scheme(registry: str) -> str:
    insecure = {h.strip() for h in os.environ.get("ENGINEBUILD_INSECURE_REGISTRIES", "").split(",") if h.strip()}
    return "http" if is_local_registry(registry) or registry in insecure else "https"


class RegistryClient:
    def __init__(self, http: Http | None = None):
        self.http = http or Http()
        self._tokens: dict = {}

    def base_url(self, registry: str) -> str:
        return f"{_scheme(registry)}://{registry}"

    def _authorized(self, ref: ImageRef, method: str, url: str, **kwargs):
        """Send a request, answering at most one auth challenge."""
        headers = dict(kwargs.pop("headers", {}))
        token = self._tokens.get((ref.registry, ref.repository))
        if token:
            headers["Authorization"] = token
        try:
            response = self.http.request(method, url, headers=headers, **kwargs)
            if response.status_code != 401:
                return response
            challenge = response.headers.get("WWW-Authenticate", "")
            headers["Authorization"] = self._answer(ref, challenge)
            self._tokens[(ref.registry, ref.repository)] = headers["Authorization"]
            response = self.http.request(method, url, headers=headers, **kwargs)
        except HttpFailure as exc:
            raise RegistryError(f"{ref.registry}: {exc}",
                                hint="the registry is unreachable or overloaded; try again later") from None
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
        # the scope the registry asked for; fall back to pull access on this repository
        query["scope"] = params.get("scope") or f"repository:{ref.repository}:pull"
        try:
            response = self.http.request("GET", params["realm"], params=query,
                                         auth=tuple(creds) if creds else None)
        except HttpFailure as exc:
            raise RegistryError(f"token service {params['realm']}: {exc}") from None
        if response.status_code != 200:
            raise RegistryError(f"token service {params['realm']} answered HTTP {response.status_code} "
                                f"for scope {query['scope']}",
                                hint=f"check access to {ref.repository}; log in with `docker login {ref.registry}`")
        try:
            body = response.json()
            token = body.get("token") or body.get("access_token")
        except ValueError:
            token = None
        if not token:
            raise RegistryError(f"token service {params['realm']} returned no token")
        return f"Bearer {token}"

    def manifest_digest(self, ref: ImageRef) -> tuple:
        digest, media_type, _ = self.manifest(ref)
        return digest, media_type

    def manifest(self, ref: ImageRef) -> tuple:
        """(digest, media type, body) of a tag's manifest, verified against the bytes served.

        The manifest body is fetched and hashed: a `Docker-Content-Digest` header that
        disagrees with the body is an error, never a recorded digest.
        """
        reference = ref.digest or ref.tag
        url = f"{self.base_url(ref.registry)}/v2/{ref.repository}/manifests/{reference}"
        response = self._authorized(ref, "GET", url, headers={"Accept": MANIFEST_TYPES})
        if response.status_code == 404:
            raise RegistryError(f"{ref}: no such manifest in {ref.registry}",
                                hint="check the repository and tag")
        if response.status_code == 403:
            raise RegistryError(f"{ref}: access denied by {ref.registry} (HTTP 403)",
                                hint="your credentials lack pull access to this repository")
        if response.status_code != 200:
            raise RegistryError(f"{ref}: {ref.registry} answered HTTP {response.status_code}")
        body = response.content
        actual = "sha256:" + hashlib.sha256(body).hexdigest()
        claimed = response.headers.get("Docker-Content-Digest")
        if claimed and claimed != actual:
            raise RegistryError(f"{ref}: registry claims digest {claimed} but the manifest it served hashes to {actual}",
                                hint="a proxy or registry is corrupting responses; nothing was recorded")
        if ref.digest and ref.digest != actual:
            raise RegistryError(f"{ref}: served manifest hashes to {actual}, not the pinned {ref.digest}")
        return actual, response.headers.get("Content-Type", ""), body

    def head_digest(self, ref: ImageRef) -> str | None:
        """The Docker-Content-Digest a HEAD reports for a tag, or None when it does not exist."""
        url = f"{self.base_url(ref.registry)}/v2/{ref.repository}/manifests/{ref.digest or ref.tag}"
        response = self._authorized(ref, "HEAD", url, headers={"Accept": MANIFEST_TYPES})
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise RegistryError(f"HEAD {ref}: {ref.registry} answered HTTP {response.status_code}")
        return response.headers.get("Docker-Content-Digest")
