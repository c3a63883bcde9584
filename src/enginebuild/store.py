"""The content-addressed store of fetched artifacts: sdists, wheels, .debs, source archives.

An artifact lives at cas/sha256/<2 hex>/<64 hex>; it enters only after its bytes hashed
to the pinned digest, so a second fetch of the same pin costs nothing.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from enginebuild.atomic import file_lock
from enginebuild.errors import FetchError
from enginebuild.http import Http, HttpFailure

CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            block = handle.read(CHUNK)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Store:
    def __init__(self, home: Path):
        self.root = Path(home) / "cas" / "sha256"

    def path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / sha256

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def verified(self, sha256: str, what: str) -> Path:
        """The stored file, re-hashed: a file that no longer matches is deleted and refused."""
        path = self.path(sha256)
        if not path.is_file():
            raise FetchError(f"{what} (sha256 {sha256[:12]}) is not in the store", hint="run `python BUILD.py fetch`")
        actual = sha256_file(path)
        if actual != sha256:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            raise FetchError(f"{what}: stored file hashes to {actual}, the lock pins {sha256}; deleted it",
                             hint="fetch it again; if this repeats, the source changed under a pinned name")
        return path

    def put_bytes(self, data: bytes) -> str:
        digest = sha256_bytes(data)
        if not self.has(digest):
            self._commit(digest, lambda handle: handle.write(data))
        return digest

    def put_file(self, source: Path) -> str:
        digest = sha256_file(source)
        if not self.has(digest):
            def copy(handle):
                with open(source, "rb") as src:
                    while block := src.read(CHUNK):
                        handle.write(block)
            self._commit(digest, copy)
        return digest

    def fetch(self, http: Http, url: str, sha256: str, what: str) -> Path:
        """Download url into the store unless the pin is already there; verify before keeping."""
        target = self.path(sha256)
        if target.is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(target.parent / f".{sha256}.lock", what, quiet=True):
            if target.is_file():
                return target
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{sha256[:12]}.", suffix=".part")
            try:
                digest = hashlib.sha256()
                try:
                    with http.request("GET", url, stream=True) as response:
                        if response.status_code != 200:
                            raise FetchError(f"{what}: GET {url} answered HTTP {response.status_code}")
                        with os.fdopen(fd, "wb") as handle:
                            fd = None
                            for block in response.iter_content(CHUNK):
                                digest.update(block)
                                handle.write(block)
                            handle.flush()
                            os.fsync(handle.fileno())
                except HttpFailure as exc:
                    raise FetchError(f"{what}: {exc}") from None
                except OSError as exc:
                    raise FetchError(f"{what}: download failed: {exc}") from None
                actual = digest.hexdigest()
                if actual != sha256:
                    raise FetchError(f"{what}: {url} has sha256 {actual}, the lock pins {sha256}; refused",
                                     hint="the upstream file changed under a pinned name; re-run `lock` only if you trust the new file")
                os.replace(tmp, target)
                tmp = None
            finally:
                if fd is not None:
                    os.close(fd)
                if tmp is not None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(tmp)
        return target

    def _commit(self, digest: str, writer) -> None:
        target = self.path(digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{digest[:12]}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as handle:
                writer(handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
