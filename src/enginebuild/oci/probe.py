"""The engine's one answer the no-op fast path needs (an image's ID), over a unix socket with
the standard library only: importing oci/engine.py (http.client, the endpoint kinds) would cost
more than the no-op itself. Anything else (another kind of engine, an error) answers None and
the full command runs, through oci/engine.py.
"""

from __future__ import annotations

import json
import socket

from enginebuild.settings import ENGINE_API_VERSION, settings


def _quote(ref: str) -> str:
    return "".join(c if c.isalnum() or c in "-._~" else f"%{ord(c):02X}" for c in ref)


def _engine_get(path: str) -> tuple[int | None, bytes]:
    host = settings().docker_host
    if not host.startswith("unix://"):
        return None, b""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    try:
        sock.connect(host[len("unix://"):])
        sock.sendall(f"GET /{ENGINE_API_VERSION}{path} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except OSError:
        return None, b""
    finally:
        sock.close()
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    try:
        return int(head.split(b" ", 2)[1]), body
    except (IndexError, ValueError):
        return None, b""


def image_id(ref: str) -> str | None:
    status, body = _engine_get(f"/images/{_quote(ref)}/json")
    if status != 200:
        return None
    try:
        return str(json.loads(body).get("Id"))
    except ValueError:
        return None
