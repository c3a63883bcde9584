"""The content-addressed store: fetched artifacts, layer blobs and component outputs.

A blob lives at cas/sha256/<2 hex>/<64 hex> and enters only after its bytes hashed to
its name. It is re-hashed before every use: a blob that no longer matches is deleted and
named, and the caller fetches or derives it again. Records (records/<kind>/<key>.json)
map a key enginebuild computed (a layer's inputs, a component's key) to the digests of
what was made from it; they are written atomically, after the blob is in place.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from enginebuild.errors import FetchError, command
from enginebuild.io import faults
from enginebuild.io.files import disk_full, mutex, sweep, temp_path, write_atomic
from enginebuild.io.http import HttpFailure
from enginebuild.io.progress import Transfer, output
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:  # requests is loaded only by what downloads (the fast paths write blobs, never fetch)
    from enginebuild.io.http import Http

CHUNK = 1 << 20
SHA256 = re.compile(r"[0-9a-f]{64}")
RECORD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")  # a record's kind or key: a file name, never a path
NET_CHUNK = 64 << 10  # a read from the network returns when this much arrived: progress stays current


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class BadBlob(FetchError):
    """A stored blob no longer matches its digest; it was deleted."""


class BadDigest(FetchError):
    """A digest that is not 64 lower-case hex digits: never used as a path."""


def is_sha256(value: object) -> bool:
    """Whether `value` is a sha256 as the store names blobs (64 lower-case hex digits)."""
    return isinstance(value, str) and SHA256.fullmatch(value) is not None


def _printable(value: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in value[:80])


class HashingWriter:
    """A file-like sink that hashes and counts what passes through it."""

    def __init__(self, handle: IO[bytes]):
        self.handle = handle
        self.digest = hashlib.sha256()
        self.size = 0

    @property
    def closed(self) -> bool:
        return self.handle.closed

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        self.handle.write(data)
        return len(data)

    def flush(self) -> None:
        self.handle.flush()

    def hexdigest(self) -> str:
        return self.digest.hexdigest()


class HashingReader:
    """A file-like source that hashes what is read through it."""

    def __init__(self, handle: IO[bytes]):
        self.handle, self.digest = handle, hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.digest.update(data)
        return data

    def drain(self) -> None:
        """Read (and hash) the rest."""
        while self.read(1 << 20):
            pass


@dataclass(frozen=True)
class Blob:
    sha256: str
    size: int


class Store:
    def __init__(self, home: Path):
        self.home = Path(home)
        self.root = self.home / "cas" / "sha256"
        self.records = self.home / "records"

    def using(self, *, collecting: bool = False) -> contextlib.AbstractContextManager[None]:
        """Every run that may write the store holds this shared; `gc` holds it alone, so that it
        never removes a blob a running build has written but not recorded yet."""
        return mutex(self.home / "gc.lock", "the store (gc)" if not collecting else "the store (a build)",
                     say=None if collecting else output().say, shared=not collecting)  # gc says so, even with -q

    # -- blobs ---------------------------------------------------------------------------
    def path(self, sha256: str) -> Path:
        """Where the blob named `sha256` lives; anything but 64 hex digits is refused (a name from
        a record or a registry is never a path)."""
        if not is_sha256(sha256):
            raise BadDigest(f"{_printable(str(sha256))!r} is not a sha256 digest; refused",
                            hint="a record or a registry cache entry names a blob by something other than its digest")
        return self.root / sha256[:2] / sha256

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def verified(self, sha256: str, what: str) -> Path:
        """The stored blob, re-hashed now; a blob that no longer matches is deleted and refused."""
        path = self.path(sha256)
        if not path.is_file():
            raise FetchError(f"{what} (sha256 {sha256[:12]}) is not in the store", hint=f"run `{command()} fetch`")
        actual = sha256_file(path)
        if actual != sha256:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            raise BadBlob(f"{what}: the stored file {path} hashes to {actual[:12]}, not {sha256[:12]}; deleted it",
                          hint="it is fetched or made again on the next run")
        return path

    def whole(self, sha256: str, what: str) -> Path:
        """The stored blob, as `verified` gives it, but re-hashed only when its stat is not the one
        it had when it was last found whole (a build reads GBs of downloads the fetch has just
        hashed)."""
        if not self._found_whole(sha256):
            self.verified(sha256, what)
            self._stamp_whole(sha256)
        return self.path(sha256)

    def intact(self, sha256: str, what: str) -> bool:
        """Present and whole. Re-hashed unless the file's stat equals the one it had when it was
        last found whole (hashing every multi-GB layer on every build would cost more than the
        build); a damaged one is named and deleted, and the caller makes it again."""
        if self._found_whole(sha256):
            return True
        if not self.check(sha256, what):
            return False
        self._stamp_whole(sha256)
        return True

    def _stat(self, sha256: str) -> list[int] | None:
        try:
            st = self.path(sha256).stat()
        except FileNotFoundError:
            return None
        return [st.st_size, st.st_mtime_ns, st.st_ino]

    def _found_whole(self, sha256: str) -> bool:
        stamp = self._stat(sha256)
        record = self.record("whole", sha256) if stamp is not None else None
        return record is not None and record.get("stat") == stamp

    def _stamp_whole(self, sha256: str) -> None:
        self.put_record("whole", sha256, {"stat": self._stat(sha256)})

    def check(self, sha256: str, what: str) -> bool:
        """True when the blob is present and intact; a damaged one is deleted (and reported)."""
        if not self.has(sha256):
            return False
        try:
            self.verified(sha256, what)
        except BadBlob as exc:
            output().say(f"  warning: {exc.message}")
            return False
        return True

    @contextlib.contextmanager
    def ingest(self, what: str) -> Iterator[HashingWriter]:
        """Write a new blob; it is named by its digest when the block ends without error.

        The caller reads `writer.hexdigest()` after the block; a failure leaves nothing behind."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = temp_path(self.root, "ingest")
        try:
            with open(tmp, "xb") as handle:
                writer = HashingWriter(handle)
                yield writer
                handle.flush()
                os.fsync(handle.fileno())
            target = self.path(writer.hexdigest())
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
            self._stamp_whole(writer.hexdigest())  # hashed as it was written: found whole until its file changes
        except OSError as exc:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            if exc.errno == errno.ENOSPC:
                raise disk_full(self.root, exc) from None
            raise
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def put_bytes(self, data: bytes, what: str = "blob") -> Blob:
        digest = sha256_bytes(data)
        if not self.check(digest, what):
            with self.ingest(what) as sink:
                sink.write(data)
        return Blob(digest, len(data))

    def fetch(self, http: Http, urls: list[str], sha256: str, what: str, size: int | None = None,
              alternatives: Callable[[], list[str]] | None = None,
              cancelled: Callable[[], bool] | None = None) -> Path:
        """The pinned file, from the store if intact, else downloaded (trying each URL, then the
        `alternatives`, such as the same file looked up by name on its index) and verified.
        `cancelled`: asked between blocks; when it says so, the download stops, nothing kept."""
        if self.check(sha256, what):
            return self.path(sha256)
        target = self.path(sha256)
        target.parent.mkdir(parents=True, exist_ok=True)
        with mutex(target.parent / f".{sha256}.lock", what, quiet=True):
            if self.check(sha256, what):
                return target
            problems: list[str] = []
            tried: set[str] = set()
            batches: tuple[Callable[[], list[str]], ...] = (lambda: urls, alternatives or (lambda: []))
            for batch in batches:
                for url in batch():
                    if url in tried:
                        continue
                    tried.add(url)
                    try:
                        self._download(http, url, sha256, what, size, target, cancelled)
                        return target
                    except BadBlob:
                        raise
                    except FetchError as exc:
                        problems.append(exc.message)
            raise FetchError("; ".join(problems) or f"{what}: no URL to fetch it from",
                             hint="check network access to its source; the pin (name and sha256) stays as locked")

    def _download(self, http: Http, url: str, sha256: str, what: str, size: int | None, target: Path,
                  cancelled: Callable[[], bool] | None = None) -> None:
        tmp = temp_path(target.parent, sha256[:12])
        try:
            try:
                with http.request("GET", url, stream=True) as response:
                    if response.status_code != 200:
                        raise FetchError(f"{what}: GET {url} answered HTTP {response.status_code}")
                    total = int(response.headers.get("Content-Length") or 0) or size
                    progress = Transfer(output(), "downloading", what, total)
                    with open(tmp, "xb") as handle:
                        sink = HashingWriter(handle)
                        for block in response.iter_content(NET_CHUNK):
                            if cancelled is not None and cancelled():
                                raise FetchError(f"{what}: download cancelled")
                            sink.write(block)
                            progress.advance(len(block))
                        handle.flush()
                        os.fsync(handle.fileno())
                    if total and total > 1 << 20:
                        progress.finish()
            except HttpFailure as exc:
                raise FetchError(f"{what}: {exc}", hint=exc.hint) from None
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    raise disk_full(target.parent, exc) from None
                raise FetchError(f"{what}: download failed: {exc}") from None
            if sink.hexdigest() != sha256:
                raise FetchError(f"{what}: {url} has sha256 {sink.hexdigest()}, the lock pins {sha256}; refused",
                                 hint="the upstream file changed under a pinned name; re-run `lock` only if you "
                                      "trust the new file")
            faults.reached("store.downloaded")
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    # -- records -------------------------------------------------------------------------
    def _record_path(self, kind: str, key: str) -> Path:
        for part in (kind, key):
            if not RECORD_NAME.fullmatch(part):
                raise BadDigest(f"{_printable(part)!r} cannot name a record; refused")
        return self.records / kind / f"{key}.json"

    def record(self, kind: str, key: str) -> JsonDoc | None:
        """A record, if present and intact: each carries the sha256 of its own content, so a
        damaged one is named, deleted and treated as absent (what it described is made again)."""
        path = self._record_path(kind, key)
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and data.get("key") == key:
            body = {k: v for k, v in data.items() if k != "check"}
            if "check" not in data:
                return None  # written by an earlier enginebuild: made again, then replaced
            if data.get("check") == sha256_bytes(_canonical(body)):
                return body
        output().say(f"  warning: the record {path} is damaged; deleted it (what it describes is made again)")
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return None

    def remove_record(self, kind: str, key: str) -> None:
        self._record_path(kind, key).unlink(missing_ok=True)

    def put_record(self, kind: str, key: str, record: JsonDoc) -> None:
        body = {**record, "key": key}
        write_atomic(self._record_path(kind, key),
                     json.dumps({**body, "check": sha256_bytes(_canonical(body))}, sort_keys=True).encode())

    def derived(self, kind: str, key: str, what: str, make: Callable[[], Blob]) -> Blob:
        """A blob made from pinned inputs: reused only while it still hashes to what was recorded;
        a damaged one is named, deleted and made again."""
        record = self.record(kind, key)
        if record and self.check(str(record["sha256"]), what):
            return Blob(str(record["sha256"]), int(record["size"]))
        blob = make()
        self.put_record(kind, key, {"sha256": blob.sha256, "size": blob.size, "what": what})
        return blob

    def sweep(self, own: bool = False) -> int:
        """Remove what killed runs left: partial downloads and ingests, temporary records (with
        `own`, this process's as well: see io/files.sweep)."""
        removed = sweep(self.root, own=own) + sweep(self.home / "tmp", own=own)
        if self.root.is_dir():
            for sub in self.root.iterdir():
                removed += sweep(sub, own=own)
        if self.records.is_dir():
            for sub in self.records.iterdir():
                removed += sweep(sub, own=own)
        return removed


def _canonical(doc: JsonDoc) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def make_blob(store: Store, what: str, write: Callable[[HashingWriter], None]) -> Blob:
    """Run `write` into a new blob and return its digest and size."""
    with store.ingest(what) as sink:
        write(sink)
    return Blob(sink.hexdigest(), sink.size)
