"""The answer to `BUILD.py image NAME...` when nothing changed, before anything else loads.

A no-op is the command users run most, so it gets its own path: the plan memo (see
plan/memo.py) and one question to the engine per image and platform, over its socket,
with the standard library only. Any doubt (an option given, a memo that does not match, an
image missing, an engine not on a unix socket) returns False and the full command runs.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from enginebuild.plan.memo import PlanMemo, memo_key
from enginebuild.settings import ENGINE_API_VERSION, settings

DEFAULT_OPTIONS: dict[str, Any] = {"build_args": {}, "on": None,
                                   "only": sorted(["components", "files", "overlays", "python", "steps", "system"]),
                                   "platforms": None}
_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-._:")


def _is_name(text: str) -> bool:
    return 0 < len(text) <= 127 and text[0] not in "-.:" and set(text) <= _NAME_CHARS


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


def _platform_args(argv: list[str]) -> tuple[list[str], list[str]] | None:
    """(names, platforms) of `image NAME... [--platform OS/ARCH]...`, or None for anything else."""
    names: list[str] = []
    platforms: list[str] = []
    rest = iter(argv)
    for arg in rest:
        if arg == "--platform":
            value = next(rest, "")
        elif arg.startswith("--platform="):
            value = arg.split("=", 1)[1]
        elif _is_name(arg):
            names.append(arg)
            continue
        else:
            return None
        if value.count("/") != 1 or not all(_is_name(part) for part in value.split("/")):
            return None
        platforms.append(value)
    return names, platforms


def answer_noop(argv: list[str], root: str) -> bool:
    if len(argv) < 2 or argv[0] != "image":
        return False
    parsed = _platform_args(argv[1:])
    if parsed is None or not parsed[0]:
        return False
    import os

    names, platforms = parsed
    options = {**DEFAULT_OPTIONS, "platforms": platforms or None}
    memo = PlanMemo(settings().home)
    lines = []
    for name in dict.fromkeys(names):
        start = time.monotonic()
        result = memo.lookup(memo_key(os.path.realpath(root), name, options))
        if not result:
            return False
        for image in result.get("images", []):
            if any(image_id(tag) != image["id"] for tag in image["tags"]):
                return False  # the full path loads and tags again
        which = ", ".join(platforms) + (" is" if len(platforms) == 1 else " are") if platforms else "every platform is"
        lines.append(f"{name}: nothing to build, {which} up to date "
                     f"({(time.monotonic() - start) * 1000:.0f} ms) -> {result['summary']}")
    print("\n".join(lines))
    return True
