"""A real HTTP proxy in front of a real registry that misbehaves on purpose.

Rules say which requests to break and how: answer a status (with headers such as
Retry-After), reset the connection (after reading part of an upload), or forward and then
lie in Docker-Content-Digest. With `bearer` on, every /v2/ request needs a token that its
own token service hands out for the scope the challenge named.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from helpers.registry import free_port

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization",
       "proxy-authenticate"}


@dataclass
class Rule:
    method: str
    path: str  # regex
    action: str  # status | reset | lie
    times: int = 1
    status: int = 503
    headers: dict = field(default_factory=dict)
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and (self.method in ("*", method)) and re.search(self.path, path) is not None


class FaultProxy:
    def __init__(self, upstream: str):
        self.upstream = upstream
        self.rules: list = []
        self.log: list = []
        self.stamps: list = []  # time.monotonic() of each request as it arrived, beside `log`
        self.served = 0  # bytes of response bodies sent to clients
        self.bearer = False
        self.tokens: dict = {}
        self.scopes: list = []
        self.port = free_port()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_any(self):
                owner.handle(self)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def add(self, method: str, path: str, action: str, **kw) -> Rule:
        rule = Rule(method, path, action, **kw)
        self.rules.append(rule)
        return rule

    def reset(self):
        self.rules.clear()
        self.log.clear()
        self.stamps.clear()
        self.bearer = False
        self.scopes.clear()

    def shutdown(self):
        self.server.shutdown()

    # -- the handler ---------------------------------------------------------------------------
    def _body(self, h) -> bytes:
        if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(h.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    h.rfile.readline()
                    return out
                out += h.rfile.read(size)
                h.rfile.readline()
        length = int(h.headers.get("Content-Length") or 0)
        return h.rfile.read(length) if length else b""

    def _send(self, h, status: int, headers: dict, body: bytes = b"", length: str | None = None):
        """`length`: a HEAD's Content-Length, as the registry gave it (a HEAD has no body to count)."""
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", length if length is not None else str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)
            self.served += len(body)

    def _token(self, h):
        query = parse_qs(urlparse(h.path).query)
        scope = (query.get("scope") or [""])[0]
        token = secrets.token_hex(16)
        self.tokens[token] = scope
        self.scopes.append(scope)
        self._send(h, 200, {"Content-Type": "application/json"}, json.dumps({"token": token}).encode())

    def handle(self, h):
        self.stamps.append((h.command, h.path, time.monotonic()))
        path = h.path
        if path.startswith("/token"):
            return self._token(h)
        if self.bearer and path.startswith("/v2/"):
            auth = h.headers.get("Authorization", "")
            if not (auth.startswith("Bearer ") and auth[7:] in self.tokens):
                match = re.match(r"/v2/(.+?)/(manifests|blobs|tags)/", path)
                challenge = f'Bearer realm="http://{self.host}/token",service="faultproxy"'
                if match:  # the version check gets a challenge without a scope, as registries answer it
                    actions = "pull" if h.command in ("GET", "HEAD") else "pull,push"
                    challenge += f',scope="repository:{match.group(1)}:{actions}"'

                self._body(h)
                self.log.append((h.command, path, 401))
                return self._send(h, 401, {"WWW-Authenticate": challenge, "Content-Type": "application/json"},
                                  b'{"errors":[{"code":"UNAUTHORIZED"}]}')
        rule = next((r for r in self.rules if r.matches(h.command, path)), None)
        if rule is not None:
            rule.times -= 1
            rule.hits += 1
            if rule.action == "status":
                self._body(h)
                self.log.append((h.command, path, rule.status))
                return self._send(h, rule.status, {"Content-Type": "application/json", **rule.headers},
                                  b'{"errors":[{"code":"UNAVAILABLE"}]}')
            if rule.action == "reset":
                length = int(h.headers.get("Content-Length") or 0)
                if length:
                    h.rfile.read(min(length, 1024))  # part of an upload, then the connection dies
                self.log.append((h.command, path, "reset"))
                h.close_connection = True
                try:
                    h.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
        body = self._body(h)
        conn = http.client.HTTPConnection(self.upstream, timeout=120)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP and k.lower() != "host"}
        headers["Host"] = self.upstream[:-3] if self.upstream.endswith(":80") else self.upstream
        if self.bearer:
            headers.pop("Authorization", None)
        conn.request(h.command, path, body=body or None, headers=headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        out = {k: v for k, v in response.getheaders() if k.lower() not in HOP and k.lower() != "content-length"}
        if "Location" in out:  # an upload's next request must come through here too
            out["Location"] = out["Location"].replace(f"//{self.upstream}/", f"//{self.host}/")
        if rule is not None and rule.action == "lie" and "Docker-Content-Digest" in out:
            out["Docker-Content-Digest"] = "sha256:" + hashlib.sha256(b"a lie").hexdigest()
        self.log.append((h.command, path, response.status))
        self._send(h, response.status, out, data,
                   response.getheader("Content-Length") if h.command == "HEAD" else None)
