"""Searching the files of a layer for secret values and credential formats, inside what they pack.

A file is searched as it is, then, when its first bytes say it is packed (gzip, xz, bzip2,
zstd, zip, tar), what it unpacks to, down to MAX_DEPTH levels: a token written through
`gzip` or into a wheel is found like one written plainly. Streamed in blocks (a window
keeps the tail of the previous block, so a value across a block boundary is found); what
a packed file expands to is bounded (MAX_UNPACKED bytes per layer): past that bound the
file is reported as not searched inside, never silently passed.
"""

from __future__ import annotations

import bz2
import fnmatch
import gzip
import lzma
import re
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

import zstandard

CHUNK = 1 << 20
MAX_DEPTH = 3
MAX_UNPACKED = 4 << 30
SPOOL_IN_MEMORY = 8 << 20
DAMAGED = (OSError, EOFError, ValueError, tarfile.TarError, zipfile.BadZipFile, lzma.LZMAError, zstandard.ZstdError)


@dataclass(frozen=True)
class Rule:
    name: str
    path: str  # glob of the path inside the image ("*" for any)
    content: re.Pattern[bytes]
    refuse: bool  # unambiguous: refuse; otherwise warn


@dataclass
class Finding:
    what: str  # a secret's name or a rule's
    path: str
    refuse: bool


def packed_kind(head: bytes) -> str | None:
    """What a file's first bytes say it packs, or None."""
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head.startswith(b"BZh") and head[3:4].isdigit():
        return "bzip2"
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return "zstd"
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    return None


def _stream_decoder(kind: str, handle: IO[bytes]) -> (gzip.GzipFile | lzma.LZMAFile | bz2.BZ2File
                                                      | zstandard.ZstdDecompressionReader):
    if kind == "gzip":
        return gzip.GzipFile(fileobj=handle, mode="rb")
    if kind == "xz":
        return lzma.LZMAFile(handle, "rb")
    if kind == "bzip2":
        return bz2.BZ2File(handle, "rb")
    return zstandard.ZstdDecompressor().stream_reader(handle, read_across_frames=True)


class Search:
    """One layer's search: the needles (encoded secret values -> name), the credential rules, and
    the budget of unpacked bytes left."""

    def __init__(self, needles: dict[bytes, str], rules: list[Rule]):
        self.needles, self.rules = needles, rules
        self.budget = MAX_UNPACKED
        self.keep = max([len(n) for n in needles] + [128]) - 1

    def file(self, handle: IO[bytes], path: str, depth: int = 0) -> list[Finding]:
        """`handle` must be seekable (a tar member of a layer on disk, or a spooled file)."""
        found = self._plain(handle, path)
        if depth >= MAX_DEPTH:
            return found
        handle.seek(0)
        kind = packed_kind(handle.read(512))
        handle.seek(0)
        if kind is None:
            return found
        try:
            found += self._inside(kind, handle, path, depth)
        except _OverBudget:
            found.append(Finding("not-searched-inside", f"{path} (expands past {MAX_UNPACKED >> 20} MiB)", False))
        except DAMAGED:
            pass  # looks packed but is not (or is damaged): its plain bytes were searched
        return found

    def names(self, member: tarfile.TarInfo) -> list[Finding]:
        """A secret's value in an entry's own name (a file or folder named after it) or a link's
        target; the path reported has the value replaced by `[redacted]`."""
        raw_name = member.name.encode("utf-8", "surrogateescape")
        raw_link = member.linkname.encode("utf-8", "surrogateescape")
        found: dict[str, Finding] = {}
        for needle, name in self.needles.items():
            if name in found or (needle not in raw_name and needle not in raw_link):
                continue
            shown = self._redacted(raw_name)
            found[name] = Finding(name, shown + (" (its name)" if needle in raw_name else " (its link target)"), True)
        return list(found.values())

    def _redacted(self, raw: bytes) -> str:
        for needle in sorted(self.needles, key=len, reverse=True):
            raw = raw.replace(needle, b"[redacted]")
        return raw.decode("utf-8", "replace")

    def _inside(self, kind: str, handle: IO[bytes], path: str, depth: int) -> list[Finding]:
        found: list[Finding] = []
        if kind == "zip":
            with zipfile.ZipFile(handle) as zipped:
                for info in zipped.infolist():
                    if not info.is_dir():
                        found += self._spooled(partial(zipped.open, info), f"{path}:{info.filename}", depth)
            return found
        if kind == "tar":
            with tarfile.open(fileobj=handle, mode="r:") as tar:
                for member in tar:
                    if member.isreg() and member.size:
                        found += self._spooled(partial(tar.extractfile, member), f"{path}:{member.name}", depth)
            return found
        return self._spooled(lambda: _stream_decoder(kind, handle), f"{path} ({kind})", depth)

    def _spooled(self, opener: Callable[[], Any], path: str, depth: int) -> list[Finding]:
        with opener() as source, tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY) as spool:
            while block := source.read(CHUNK):
                self.budget -= len(block)
                if self.budget < 0:
                    raise _OverBudget
                spool.write(block)
            spool.seek(0)
            return self.file(spool, path, depth + 1)

    def _plain(self, handle: IO[bytes], path: str) -> list[Finding]:
        found: dict[str, Finding] = {}
        tail = b""
        clean = path.split(":", 1)[0]
        active = [r for r in self.rules if r.path == "*" or fnmatch.fnmatchcase("/" + clean, r.path)]
        while block := handle.read(CHUNK):
            window = tail + block
            for needle, name in self.needles.items():
                if name not in found and needle in window:
                    found[name] = Finding(name, path, True)
            for rule in active:
                if rule.name not in found and rule.content.search(window):
                    found[rule.name] = Finding(rule.name, path, rule.refuse)
            tail = window[-self.keep:]
        return list(found.values())


class _OverBudget(Exception):
    pass


def search_tar(tar_path: str | Path, needles: dict[bytes, str], rules: list[Rule]) -> list[Finding]:
    """Every regular file of a layer tar on disk, searched with what it packs; a stored blob that
    is not a tar (a component's wheel) is searched as one file."""
    search = Search(needles, rules)
    findings: list[Finding] = []
    if not tarfile.is_tarfile(tar_path):
        with open(tar_path, "rb") as whole:
            return search.file(whole, str(tar_path).rsplit("/", 1)[-1])
    with tarfile.open(tar_path, "r:") as tar:
        for member in tar:
            findings += search.names(member)
            if not member.isreg() or member.size == 0:
                continue
            handle = tar.extractfile(member)
            assert handle is not None
            findings += search.file(handle, member.name)
    return findings
