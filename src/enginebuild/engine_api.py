"""A small client for the Docker Engine API, for the questions asked on every run.

Whether a stage's image exists is asked on every `image` and `plan`; answering it
through http.client over the engine's socket keeps a no-op run in milliseconds
(importing the docker SDK alone costs a quarter of a second). Pushes, which stream
and authenticate, go through the docker SDK (see push.py).
"""
from __future__ import annotations

import http.client
import json
import os
import socket
from urllib.parse import quote, urlencode, urlparse

from enginebuild.errors import EngineBuildError

API_VERSION = "v1.41"


class EngineUnavailable(EngineBuildError):
    pass


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


class EngineAPI:
    def __init__(self, host: str | None = None, timeout: float = 60.0):
        self.host = host or docker_host()
        self.timeout = timeout

    def _connection(self):
        parsed = urlparse(self.host)
        if parsed.scheme == "unix":
            return _UnixConnection(parsed.path, self.timeout)
        if parsed.scheme in ("tcp", "http"):
            return http.client.HTTPConnection(parsed.hostname, parsed.port or 2375, timeout=self.timeout)
        raise EngineUnavailable(f"DOCKER_HOST={self.host}: only unix:// and tcp:// engines are supported")

    def call(self, method: str, path: str, params: dict | None = None, ok=(200, 201, 204)):
        url = f"/{API_VERSION}{path}"
        if params:
            url += "?" + urlencode(params)
        conn = self._connection()
        try:
            conn.request(method, url)
            response = conn.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise EngineUnavailable(f"cannot reach the Docker engine at {self.host}: {exc}",
                                    hint="start dockerd (see README: set-up) or set DOCKER_HOST") from None
        finally:
            conn.close()
        if response.status == 404:
            return None
        if response.status not in ok:
            try:
                message = json.loads(body).get("message", "")
            except ValueError:
                message = body[:200].decode("utf-8", "replace")
            raise EngineBuildError(f"Docker engine: {method} {path} failed ({response.status}): {message}")
        return json.loads(body) if body.strip() else None

    def inspect(self, ref: str) -> dict | None:
        return self.call("GET", f"/images/{quote(ref, safe='')}/json")

    def tags_of(self, repository: str) -> set:
        """Every tag of a repository present in the engine, in one call."""
        images = self.call("GET", "/images/json",
                           {"filters": json.dumps({"reference": [f"{repository}:*"]})}) or []
        tags = set()
        for image in images:
            for ref in image.get("RepoTags") or []:
                repo, _, tag = ref.rpartition(":")
                if repo == repository:
                    tags.add(tag)
        return tags

    def tag(self, source: str, repository: str, tag: str) -> None:
        self.call("POST", f"/images/{quote(source, safe='')}/tag", {"repo": repository, "tag": tag})

    def remove(self, ref: str, force: bool = False) -> None:
        self.call("DELETE", f"/images/{quote(ref, safe='')}", {"force": "1" if force else "0"}, ok=(200,))

    def ping(self) -> bool:
        try:
            conn = self._connection()
            conn.request("GET", "/_ping")
            ok = conn.getresponse().status == 200
            conn.close()
            return ok
        except OSError:
            return False
