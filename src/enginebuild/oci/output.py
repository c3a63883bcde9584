"""What a container prints, read with one bound.

A container of an image another party wrote (a behaviour check, a serving node) may print without
end. Everything enginebuild reads of a container's output goes through `read_output`: at most
`OUTPUT_LIMIT` bytes of its stdout and stderr together are kept, and the reading stops there (the
rest is not read at all). The engine keeps no more of it on disk than `LOG_CONFIG` allows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

OUTPUT_LIMIT = 1 << 20  # bytes of a container's stdout and stderr that enginebuild reads, together
# the engine's own copy of what a container enginebuild runs prints: one json-file of at most 8 MiB
# (JSON-escaped output is up to six times its bytes), rotated in place: a container printing GBs
# costs the host's disk no more than that
LOG_CONFIG = {"Type": "json-file", "Config": {"max-size": "8m", "max-file": "1"}}


class Readable(Protocol):
    def read(self, amt: int | None = None, /) -> bytes: ...


@dataclass(frozen=True)
class Output:
    out: bytes
    err: bytes
    over: bool = False  # it printed more than the limit: what is here is its first `limit` bytes

    def __repr__(self) -> str:
        return f"Output(out={len(self.out)} B, err={len(self.err)} B, over={self.over})"


def _exactly(stream: Readable, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(min(size - len(data), 1 << 16))
        if not chunk:
            break
        data.extend(chunk)
    return bytes(data)


def read_output(stream: Readable, limit: int = OUTPUT_LIMIT) -> Output:
    """A container's log stream without a TTY (frames of an 8-byte header, stream and size, and that
    many bytes), up to `limit` bytes of output in all: past it, reading stops and `over` is set."""
    out, err = bytearray(), bytearray()
    kept = 0
    while True:
        header = _exactly(stream, 8)
        if len(header) < 8:
            return Output(bytes(out), bytes(err))
        size = int.from_bytes(header[4:8], "big")
        take = min(size, limit - kept)
        data = _exactly(stream, take)
        (err if header[0] == 2 else out).extend(data)
        kept += len(data)
        if size > take:
            return Output(bytes(out), bytes(err), over=True)
        if len(data) < take:
            return Output(bytes(out), bytes(err))


def describe_limit(limit: int = OUTPUT_LIMIT) -> str:
    return f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"
