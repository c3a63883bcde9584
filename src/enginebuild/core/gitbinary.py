"""Git's binary patches (`GIT binary patch`, as `git diff --binary` writes them): base85 lines,
zlib, and git's delta format, decoded here; standard library only.

A file's section holds a forward fragment and, after a blank line, a reverse one; each is
`literal SIZE` (the new bytes) or `delta SIZE` (instructions against the old bytes), SIZE
being the inflated size. Git checks the preimage by its blob id before it applies one, and
the result by the new id (`index OLD..NEW`, full 40-hex ids): `blob_id` is that id.

A patch is another party's text: what a fragment inflates to and what a delta makes are held to
the sizes they state, and those to MAX_BYTES, before and while the bytes are made.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass

_ALPHABET = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
_VALUE = {c: i for i, c in enumerate(_ALPHABET)}
MAX_BYTES = 64 << 20  # a file a binary patch makes or carries (git itself applies larger ones; no patch stack needs to)


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
    """A fragment from its data lines: decoded, inflated no further than its stated size (itself
    at most MAX_BYTES), and held to it."""
    if size > MAX_BYTES:
        raise BinaryPatchError(f"it states {size} bytes; a binary patch of enginebuild's carries at most {MAX_BYTES}")
    raw = b"".join(decode_base85_line(line) for line in lines)
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(raw, size + 1)
    except zlib.error as exc:
        raise BinaryPatchError(f"its data does not inflate ({exc})") from None
    if len(data) > size or inflater.unconsumed_tail:
        raise BinaryPatchError(f"its data inflates to more than the {size} bytes it states")
    if len(data) != size or not inflater.eof:
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
    if result_size > MAX_BYTES:
        raise BinaryPatchError(f"the delta makes {result_size} bytes; a binary patch of enginebuild's makes at most "
                               f"{MAX_BYTES}")
    out = bytearray()
    while at < len(delta):
        op = delta[at]
        at += 1
        if op & 0x80:  # copy: offset and size, each byte present when its bit is set
            offset = size = 0
            if at + bin(op & 0x7F).count("1") > len(delta):
                raise BinaryPatchError("a delta ends inside a copy instruction")
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
            if len(out) + size > result_size:
                raise BinaryPatchError(f"the delta makes more than the {result_size} bytes it states")
            out += old[offset:offset + size]
        elif op:  # insert the next `op` bytes
            if at + op > len(delta):
                raise BinaryPatchError("a delta inserts past its own end")
            if len(out) + op > result_size:
                raise BinaryPatchError(f"the delta makes more than the {result_size} bytes it states")
            out += delta[at:at + op]
            at += op
        else:
            raise BinaryPatchError("a delta holds the reserved instruction 0")
    if len(out) != result_size:
        raise BinaryPatchError(f"the delta makes {len(out)} bytes, not the {result_size} it states")
    return bytes(out)
