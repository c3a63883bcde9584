"""Key material from a file or a variable, read so that it is never printed.

A variable that holds a key (ENGINEBUILD_SIGNING_KEY, ENGINEBUILD_CACHE_KEY) may hold the PEM text,
the PEM's base64 body without its armour (what a CI secret becomes when the `-----BEGIN` lines are
lost), or the path of a file. Its value is never put in a message: an error names the variable and,
for a file that exists, the file. A file is read only when it is a regular file, and no further than
`MAX_KEY_BYTES` (a device or a FIFO named as a key neither fills memory nor blocks)."""

from __future__ import annotations

import base64
import binascii
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from enginebuild.errors import UserError

MAX_KEY_BYTES = 64 << 10
_BASE64 = re.compile(rb"[A-Za-z0-9+/=\s]+")


@dataclass(frozen=True)
class KeyMaterial:
    """What a key was given as: `where` names it in messages (a variable or a file, never the value)."""

    where: str
    data: bytes = b""  # PEM text
    der: bytes = b""  # a bare base64 body, decoded

    def __repr__(self) -> str:  # never the key itself
        return f"KeyMaterial({self.where!r})"


def read_key_file(path: Path, where: str) -> bytes:
    """A key file's bytes: a regular file of at most MAX_KEY_BYTES, else a UserError naming `where`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UserError(f"{where}: cannot be read ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserError(f"{where}: not a regular file (a key is a file of at most {MAX_KEY_BYTES} bytes)")
        with os.fdopen(os.dup(fd), "rb") as stream:
            data = stream.read(MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{where}: cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_KEY_BYTES:
        raise UserError(f"{where}: more than {MAX_KEY_BYTES} bytes is not a key file")
    return data


def _bare_body(value: str) -> bytes:
    """The DER bytes of a PEM body that lost its armour, or b"" when `value` is not one."""
    raw = value.encode("utf-8", "replace")
    if len(raw) < 40 or len(raw) > MAX_KEY_BYTES or not _BASE64.fullmatch(raw):
        return b""
    try:
        der = base64.b64decode(b"".join(raw.split()), validate=True)
    except (binascii.Error, ValueError):
        return b""
    return der if der[:1] == b"\x30" else b""  # a DER SEQUENCE, as every key form starts


def from_variable(variable: str, value: str) -> KeyMaterial:
    """The key a variable holds: PEM text, a bare body, or the path of a file. Errors name
    `$variable` (and a file that exists), never the value."""
    if "-----BEGIN" in value:
        return KeyMaterial(f"${variable}", data=value.encode("utf-8", "replace"))
    der = _bare_body(value)
    if der:
        return KeyMaterial(f"${variable} (a PEM body without its -----BEGIN lines)", der=der)
    candidate = value.strip()
    path = Path(candidate).expanduser() if candidate and "\n" not in candidate and len(candidate) < 4096 else None
    if path is None or not _exists(path):
        raise UserError(f"${variable}: neither PEM text nor the path of a file that exists (the value is not "
                        "shown: it may be a key)",
                        hint=f"set {variable} to the key's PEM text, with its -----BEGIN and -----END lines, "
                             "or to the path of the PEM file")
    where = f"{path} (${variable})"
    return KeyMaterial(where, data=read_key_file(path, where))


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False
