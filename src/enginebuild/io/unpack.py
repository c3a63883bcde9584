"""How far an archive may expand when enginebuild unpacks it, and errors that blame the right thing.

A source archive or package is unpacked into the store, a build context and the engine, so
what it expands to costs disk several times over. The default bound is generous for real
archives and small for bombs: the larger of MIN_LIMIT and RATIO times the archive's own size
(a 35 MB vLLM sdist may unpack to 3.5 GB; a 2 MB archive to 1 GiB). A source that really
expands further says so with `max-unpacked` (docs/spec.md). The sizes counted are those the
members declare, checked before a member is read, so nothing past the bound is written.
"""

from __future__ import annotations

import errno
import re

from enginebuild.errors import FetchError, UserError

RATIO = 100
MIN_LIMIT = 1 << 30
_SIZE = re.compile(r"(?P<n>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[KMGT]i?B|B)?")
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def parse_size(text: str | int) -> int:
    """`8GiB`, `500MB`, `1048576` -> bytes; UserError otherwise."""
    if isinstance(text, int):
        return text
    match = _SIZE.fullmatch(str(text).strip())
    if not match:
        raise UserError(f"{text!r} is not a size (write it as 8GiB, 500MB or a number of bytes)")
    return int(float(match["n"]) * _UNITS[match["unit"] or "B"])


def size_problem(value: str) -> str | None:
    """For a spec's schema: None when `value` is a size, else what is wrong."""
    try:
        parse_size(value)
    except UserError:
        return f"expected a size such as 8GiB or 500MB, got {value!r}"
    return None


def human(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


class Budget:
    """What one archive may still expand to."""

    def __init__(self, what: str, archive_size: int, limit: int | None = None):
        self.what = what
        self.limit = limit if limit is not None else max(MIN_LIMIT, RATIO * archive_size)
        self.given = limit is not None
        self.left = self.limit

    def take(self, size: int) -> None:
        self.left -= max(0, size)
        if self.left < 0:
            how = "its source's max-unpacked" if self.given else \
                f"the default for an archive of this size ({RATIO}x, at least {human(MIN_LIMIT)})"
            raise FetchError(f"{self.what}: unpacks to more than {human(self.limit)}, {how}; stopped before "
                             "writing past it, nothing was kept",
                             hint="if it really is that large unpacked, set `max-unpacked` on its source "
                                  "(for example max-unpacked: 8GiB)")


def is_disk_full(exc: BaseException) -> bool:
    """A write failed because the disk is full: the input being read is not to blame."""
    return isinstance(exc, OSError) and exc.errno == errno.ENOSPC
