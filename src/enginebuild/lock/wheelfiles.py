"""Which distributions of a closure write the same files, read at lock time without downloading
their wheels.

A wheel is a zip: its central directory, at the end of the file, names every member with its
size and CRC. It is read with HTTP range requests (a few KiB of a 900 MiB wheel); a server
that ignores `Range` sends the whole file, which is read as it comes. Two distributions
*share* when they would install a same path (dist-info excepted) with other bytes (size or
CRC), however small, or when the paths both would install add up to SHARED_MIN bytes or more.
`cuda-python` 12.6 and `cuda-bindings` 13.5 install 67 MiB under the same paths, other
bytes: which copy is left depends on the order of installation, and one layer per
distribution would keep both. `flashinfer-python` and `torch-c-dlpack-ext` each install a
top-level `build_backend.py` of their own. A namespace package's empty `__init__.py`, which
many NVIDIA wheels install alike, keeps them apart. The plan puts distributions that share
into one layer, where each path is written once, in pip's order (plan/wheelgroups.py).
"""

from __future__ import annotations

import io
import struct
import tempfile
import zipfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import IO

from enginebuild.io.http import Http, HttpFailure
from enginebuild.io.progress import output
from enginebuild.lock.pins import PyPin

SHARED_MIN = 2**20  # bytes of shared files that make two distributions share a layer
READERS = 8         # wheels whose file lists are read at once
MAX_ENTRIES = 200_000          # members of one wheel's central directory (torch's has about 13 000)
MAX_DIRECTORY = 64 << 20       # bytes of one wheel's central directory
SCHEMES = {"purelib": "site", "platlib": "site", "scripts": "scripts", "data": "data"}


class _Ranged(io.RawIOBase):
    """A remote file read by HTTP range requests, seekable, as zipfile needs."""

    def __init__(self, http: Http, url: str, size: int):
        self.http, self.url, self.size, self.pos = http, url, size, 0
        self.whole: IO[bytes] | None = None  # the server ignored Range: the file as it came

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.pos = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + offset
        return self.pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        end = min(self.size, self.pos + len(buffer))
        if end <= self.pos:
            return 0
        if self.whole is not None:
            self.whole.seek(self.pos)
            data = self.whole.read(end - self.pos)
        else:
            data = self._fetch(self.pos, end)
        buffer[:len(data)] = data
        self.pos += len(data)
        return len(data)

    def _fetch(self, start: int, end: int) -> bytes:
        response = self.http.request("GET", self.url, headers={"Range": f"bytes={start}-{end - 1}"}, stream=True)
        with response:
            if response.status_code == 206:
                total = response.headers.get("Content-Range", "").rpartition("/")[2]
                if total.isdigit() and int(total) != self.size:  # the file served is not the one the lock sized
                    raise HttpFailure(f"GET {self.url}: the file is {total} bytes, not the {self.size} recorded",
                                      "size", response)
                return bytes(response.content)
            if response.status_code != 200:
                raise HttpFailure(f"GET {self.url}: HTTP {response.status_code}", "status", response)
            whole = tempfile.TemporaryFile()
            for chunk in response.iter_content(2**20):
                whole.write(chunk)
                if whole.tell() > self.size:  # never more than the file's size is read
                    whole.close()
                    raise HttpFailure(f"GET {self.url}: the server sent more than the file's {self.size} bytes",
                                      "size", response)
        self.whole = whole
        whole.seek(start)
        return whole.read(end - start)

    def close(self) -> None:
        if self.whole is not None:
            self.whole.close()
        super().close()


def installed_paths(names: Iterable[zipfile.ZipInfo]) -> dict[str, tuple[int, int]]:
    """Where each member of a wheel is installed (relative to its scheme), with its size and CRC;
    the distribution's own metadata and headers (per distribution) left out."""
    out: dict[str, tuple[int, int]] = {}
    for info in names:
        name = info.filename
        if name.endswith("/"):
            continue
        top, _, rest = name.partition("/")
        if top.endswith(".dist-info"):
            continue
        if top.endswith(".data"):
            scheme, _, rest = rest.partition("/")
            if scheme not in SCHEMES:
                continue
            out[f"{SCHEMES[scheme]}/{rest}"] = (info.file_size, info.CRC)
        else:
            out[f"site/{name}"] = (info.file_size, info.CRC)
    return out


def wheel_files(http: Http, pin: PyPin) -> dict[str, tuple[int, int]] | None:
    """The files `pin`'s wheel installs, or None when it cannot be read here."""
    if not pin.url.startswith(("http://", "https://")) or not pin.size or not pin.filename.endswith(".whl"):
        return None
    raw = _Ranged(http, pin.url, pin.size)
    try:
        reader = io.BufferedReader(raw, 2**16)
        check_directory(reader, pin.size)
        with zipfile.ZipFile(reader) as zipped:
            return installed_paths(zipped.infolist())
    except (HttpFailure, zipfile.BadZipFile, OSError) as exc:
        output().say(f"  python {pin.name} {pin.version}: its file list could not be read ({exc}); "
                     "its layer is not shared with distributions writing the same files")
        return None
    finally:
        raw.close()


def check_directory(handle: IO[bytes], size: int) -> None:
    """The zip's end record read first: a central directory of more than MAX_ENTRIES members or
    MAX_DIRECTORY bytes is refused before zipfile reads it (memory stays bounded)."""
    tail = min(size, 22 + 65535)
    handle.seek(size - tail)
    data = handle.read(tail)
    at = data.rfind(b"PK\x05\x06")
    if at < 0 or len(data) < at + 22:
        raise zipfile.BadZipFile("no end of central directory record")
    entries, directory = struct.unpack("<HI", data[at + 10:at + 16])
    if data[at - 20:at - 16] == b"PK\x06\x07":  # zip64: the record it points at has the real figures
        handle.seek(struct.unpack("<Q", data[at - 12:at - 4])[0])
        record = handle.read(56)
        if record[:4] != b"PK\x06\x06" or len(record) < 56:
            raise zipfile.BadZipFile("a damaged zip64 end record")
        entries, directory = struct.unpack("<QQ", record[32:48])
    if entries > MAX_ENTRIES or directory > MAX_DIRECTORY:
        raise zipfile.BadZipFile(f"its central directory lists {entries} members in {directory} bytes, more than "
                                 f"{MAX_ENTRIES} members or {MAX_DIRECTORY >> 20} MiB are read")
    handle.seek(0)


def sharing(files: dict[str, dict[str, tuple[int, int]]]) -> dict[str, tuple[str, ...]]:
    """For each distribution, the others that install a same path with other bytes, or paths
    adding up to SHARED_MIN bytes or more."""
    by_path: dict[str, list[str]] = {}
    for name, paths in files.items():
        for path in paths:
            by_path.setdefault(path, []).append(name)
    shared: dict[tuple[str, str], int] = {}
    differ: set[tuple[str, str]] = set()
    for path, names in by_path.items():
        for i, a in enumerate(sorted(names)):
            for b in sorted(names)[i + 1:]:
                if files[a][path] != files[b][path]:
                    differ.add((a, b))
                shared[(a, b)] = shared.get((a, b), 0) + max(files[a][path][0], files[b][path][0])
    out: dict[str, set[str]] = {}
    for (a, b), size in shared.items():
        if size >= SHARED_MIN or (a, b) in differ:
            out.setdefault(a, set()).add(b)
            out.setdefault(b, set()).add(a)
    return {name: tuple(sorted(others)) for name, others in out.items()}


def with_shares(pins: dict[str, PyPin]) -> dict[str, PyPin]:
    """The pins, each naming the distributions of the closure it shares files with."""
    http = Http(attempts=3)
    readable = [p for p in pins.values() if p.origin in ("index", "url")]
    with ThreadPoolExecutor(READERS) as pool:
        lists = dict(zip([p.name for p in readable], pool.map(lambda p: wheel_files(http, p), readable), strict=True))
    shares = sharing({name: paths for name, paths in lists.items() if paths})
    return {name: replace(pin, shares=shares.get(name, ())) for name, pin in pins.items()}
