"""Git's binary patches (`GIT binary patch`, as `git diff --binary` writes them): base85 lines,
zlib, and git's delta format, decoded here; standard library only.

A file's section holds a forward fragment and, after a blank line, a reverse one; each is
`literal SIZE` (the new bytes) or `delta SIZE` (instructions against the old bytes), SIZE
being the inflated size. Git checks the preimage by its blob id before it applies one, and
the result by the new id (`index OLD..NEW`, full 40-hex ids): `blob_id` is that id.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass

_ALPHABET = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
_VALUE = {c: i for i, c in enumerate(_ALPHABET)}


class BinaryPatchError(ValueError):
    pass


@dataclass(frozen=True)
class Fragment:
    kind: str  # literal | delta
    data: bytes  # inflated: the new bytes (literal) or the delta's instructions

    def apply(self, old: bytes) -> bytes:
        return self.data if self.kind == "literal" else apply_delta(old, self.data)


def blob_id(data: bytes) -> str:
    """Git's object id of a file's bytes (SHA-1 of `blob SIZE\\0` and the bytes)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def decode_base85_line(line: str) -> bytes:
    """One line of a binary patch: a length character (A-Z: 1-26, a-z: 27-52), then base85."""
    if not line:
        raise BinaryPatchError("an empty line inside the data")
    head = line[0]
    if "A" <= head <= "Z":
        size = ord(head) - ord("A") + 1
    elif "a" <= head <= "z":
        size = ord(head) - ord("a") + 27
    else:
        raise BinaryPatchError(f"a data line starts with {head!r}, not a length")
    body = line[1:].encode("ascii", "replace")
    if len(body) % 5 or len(body) // 5 * 4 < size:
        raise BinaryPatchError("a data line's length does not match its base85 characters")
    out = bytearray()
    for i in range(0, len(body), 5):
        value = 0
        for c in body[i:i + 5]:
            if c not in _VALUE:
                raise BinaryPatchError(f"{chr(c)!r} is not a base85 character")
            value = value * 85 + _VALUE[c]
        if value >= 1 << 32:
            raise BinaryPatchError("a base85 group overflows 32 bits")
        out += value.to_bytes(4, "big")
    return bytes(out[:size])


def read_fragment(kind: str, size: int, lines: list[str]) -> Fragment:
    """A fragment from its data lines: decoded, inflated, and held to its stated size."""
    raw = b"".join(decode_base85_line(line) for line in lines)
    try:
        data = zlib.decompress(raw)
    except zlib.error as exc:
        raise BinaryPatchError(f"its data does not inflate ({exc})") from None
    if len(data) != size:
        raise BinaryPatchError(f"its data inflates to {len(data)} bytes, not the {size} it states")
    return Fragment(kind, data)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise BinaryPatchError("a delta ends inside a size")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def apply_delta(old: bytes, delta: bytes) -> bytes:
    """Git's delta: the source and result sizes, then copies from the source and inserts."""
    source_size, at = _varint(delta, 0)
    result_size, at = _varint(delta, at)
    if source_size != len(old):
        raise BinaryPatchError(f"the delta is for a file of {source_size} bytes; this one has {len(old)}")
    out = bytearray()
    while at < len(delta):
        op = delta[at]
        at += 1
        if op & 0x80:  # copy: offset and size, each byte present when its bit is set
            offset = size = 0
            for bit in range(4):
                if op & (1 << bit):
                    offset |= delta[at] << (8 * bit)
                    at += 1
            for bit in range(3):
                if op & (1 << (4 + bit)):
                    size |= delta[at] << (8 * bit)
                    at += 1
            size = size or 0x10000
            if offset + size > len(old):
                raise BinaryPatchError("a delta copies past the end of the file")
            out += old[offset:offset + size]
        elif op:  # insert the next `op` bytes
            if at + op > len(delta):
                raise BinaryPatchError("a delta inserts past its own end")
            out += delta[at:at + op]
            at += op
        else:
            raise BinaryPatchError("a delta holds the reserved instruction 0")
    if len(out) != result_size:
        raise BinaryPatchError(f"the delta makes {len(out)} bytes, not the {result_size} it states")
    return bytes(out)
