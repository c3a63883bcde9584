"""The answer to `BUILD.py image NAME...` when nothing changed, before anything else loads.

A no-op is the command users run most, so it gets its own path: the plan memo (see
memo.py) and two questions to the engine over its socket, with nothing imported that
this needs not. Any doubt (an option given, a memo that does not match, a stage missing,
an engine not on a unix socket) returns False and the full command runs instead.
"""
from __future__ import annotations

import json
import os
import socket
import time

API = "/v1.41"
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-")


def _is_name(text: str) -> bool:
    return 0 < len(text) <= 63 and text[0] != "-" and set(text) <= _NAME_CHARS


def _quote(ref: str) -> str:
    return "".join(c if c.isalnum() or c in "-._~" else "%{:02X}".format(ord(c)) for c in ref)


def _engine_get(path: str):
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        return None, None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    try:
        sock.connect(host[len("unix://"):])
        sock.sendall(f"GET {API}{path} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        return None, None
    finally:
        sock.close()
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None, None
    return status, body


def _image_id(ref: str):
    status, body = _engine_get(f"/images/{_quote(ref)}/json")
    if status != 200:
        return None
    try:
        return json.loads(body).get("Id")
    except ValueError:
        return None


def answer_noop(argv, root) -> bool:
    if len(argv) < 2 or argv[0] != "image" or not all(_is_name(a) for a in argv[1:]):
        return False
    from enginebuild.memo import PlanMemo, memo_key

    explicit = os.environ.get("ENGINEBUILD_HOME")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    options = {"build_args": {}, "on": None, "only": None, "platform": None}
    memo = PlanMemo(explicit or os.path.join(cache, "enginebuild"))
    lines = []
    for name in dict.fromkeys(argv[1:]):
        start = time.monotonic()
        result = memo.lookup(memo_key(os.path.realpath(root), name, options))
        if not result:
            return False
        final = _image_id(result["final_tag"])
        if final is None or _image_id(result["image_tag"]) != final:
            return False  # the full path re-tags
        lines.append(f"{name}: all {result['stages']} stages exist; nothing to build "
                     f"({(time.monotonic() - start) * 1000:.0f} ms) -> {result['image_tag']}")
    print("\n".join(lines))
    return True
