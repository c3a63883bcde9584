"""Uploading images to a registry from enginebuild's store, with enginebuild's registry client.

Layers enginebuild made are compressed once, deterministically, so the same layer gets the
same digest on any machine and is never uploaded twice: gzip by default (the standard
library's zlib, level 6, no name, no time: what every consumer reads); on request gzip made by
ISA-L (`gzip-isal`: the pinned `isal` and the ISA-L it bundles, level 2, fed in fixed 1 MiB
blocks, whose boundaries its output depends on; about ten times faster than zlib for a layer
about 14% larger, read by every gzip consumer), or zstd (the pinned `zstandard` and the
libzstd it bundles, level 3, one thread, no content size: Docker 23 and later, containerd 1.5
and later). The digest of a layer changes with the compression, its level, and the version of
the library that made it (pinned in requirements.txt, and part of the store's record kind).
Base layers are copied from the base's registry as they are. A blob the registry already has
is not sent, and one another repository of that registry has is mounted from it
(cross-repository mount). Each platform gets a manifest; several platforms an OCI index.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any, cast

import isal
import zstandard  # type: ignore[import-untyped,unused-ignore]
from isal import igzip

from enginebuild.errors import RegistryError
from enginebuild.io.background import completed
from enginebuild.io.files import opener
from enginebuild.io.progress import Transfer, output
from enginebuild.io.store import Store, make_blob
from enginebuild.oci.image import OCI_LAYER_GZIP, OCI_LAYER_ZSTD, Layer, index, manifest, platform_of
from enginebuild.oci.reference import ImageRef, parse_image_ref
from enginebuild.oci.registry import RegistryApi, sha256_digest

GZIP_LEVEL = 6
ISAL_LEVEL = 2
ZSTD_LEVEL = 3
BLOCK = 1 << 20  # what a compressor is fed at a time (ISA-L's output depends on it)
UPLOADS = 4  # blobs sent at a time
HOMES = 8  # repositories remembered per blob, the latest first (to mount it from)


def _gzip(source: IO[bytes], sink: IO[bytes]) -> None:
    with gzip.GzipFile(filename="", mode="wb", compresslevel=GZIP_LEVEL, fileobj=sink, mtime=0) as out:
        shutil.copyfileobj(source, out, 1 << 20)


def _blocks(source: IO[bytes]) -> Iterator[bytes]:
    """The source in blocks of exactly BLOCK bytes (the last shorter), however reads return."""
    while True:
        block = source.read(BLOCK)
        while block and len(block) < BLOCK:
            more = source.read(BLOCK - len(block))
            if not more:
                break
            block += more
        if not block:
            return
        yield block


def _gzip_isal(source: IO[bytes], sink: IO[bytes]) -> None:
    writer = cast(Any, igzip).GzipFile  # untyped in the binding
    with writer(filename="", mode="wb", compresslevel=ISAL_LEVEL, fileobj=sink, mtime=0) as out:
        for block in _blocks(source):
            out.write(block)


def _zstd(source: IO[bytes], sink: IO[bytes]) -> None:
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=0, write_content_size=False)
    with compressor.stream_writer(sink, closefd=False) as out:
        shutil.copyfileobj(source, out, 1 << 20)


@dataclass(frozen=True)
class Compression:
    """How the layers enginebuild made are compressed for a registry; `record`: the store's
    record of each layer's compressed (sha256, size), made once."""

    name: str
    media_type: str
    record: str
    write: Callable[[IO[bytes], IO[bytes]], None]


COMPRESSIONS = {"gzip": Compression("gzip", OCI_LAYER_GZIP, "gzip", _gzip),
                "gzip-isal": Compression("gzip-isal", OCI_LAYER_GZIP, f"gzip-isal-{isal.__version__}-{ISAL_LEVEL}",
                                         _gzip_isal),
                "zstd": Compression("zstd", OCI_LAYER_ZSTD, f"zstd-{ZSTD_LEVEL}", _zstd)}
GZIP = COMPRESSIONS["gzip"]


def blob_homes(store: Store, digest: str) -> list[str]:
    """The repositories (REGISTRY/REPO, the latest first) this store pushed `digest` to or saw it in."""
    record = store.record("blob-homes", digest.removeprefix("sha256:"))
    return [str(r) for r in (record or {}).get("repositories", [])]


def remember_homes(store: Store, digest: str, repositories: list[str]) -> None:
    """`repositories` first, then those known before, the latest HOMES kept (written only on change)."""
    known = blob_homes(store, digest)
    merged = list(dict.fromkeys([*repositories, *known]))[:HOMES]
    if merged != known:
        store.put_record("blob-homes", digest.removeprefix("sha256:"), {"repositories": merged})


def recorded(store: Store, layer: Layer, compression: Compression = GZIP) -> tuple[str, int] | None:
    """(sha256, size) of the layer's compressed form when it was made before (kept or not)."""
    assert layer.blob is not None
    record = store.record(compression.record, layer.blob)
    return (str(record["sha256"]), int(record["size"])) if record else None


def compressed(store: Store, layer: Layer, compression: Compression = GZIP) -> tuple[str, int]:
    """(sha256, size) of the layer's deterministic compressed form, made once and recorded."""
    assert layer.blob is not None
    record = store.record(compression.record, layer.blob)
    if record and store.check(str(record["sha256"]), f"compressed {layer.created_by}"):
        return str(record["sha256"]), int(record["size"])
    source = store.verified(layer.blob, layer.created_by)

    def write(sink: Any) -> None:  # a HashingWriter, given to compressors that take a file
        with open(source, "rb") as handle:
            compression.write(handle, sink)

    blob = make_blob(store, f"compressed {layer.created_by}", write)
    store.put_record(compression.record, layer.blob, {"sha256": blob.sha256, "size": blob.size})
    return blob.sha256, blob.size


class ProgressReader:
    """A file-like upload body of known length (so it is sent with Content-Length, not chunked)."""

    def __init__(self, handle: IO[bytes], size: int, transfer: Transfer | None):
        self.handle, self.size, self.transfer = handle, size, transfer

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        if self.transfer is not None and data:
            self.transfer.advance(len(data))
        return data

    def __len__(self) -> int:
        return self.size


@dataclass
class PushStats:
    layers_pushed: int = 0
    bytes_pushed: int = 0
    layers_existing: int = 0
    layers_mounted: int = 0  # linked from another repository of the same registry: no byte sent
    blobs: list[str] = field(default_factory=list)


@dataclass
class Pusher:
    client: RegistryApi
    store: Store
    target: ImageRef
    compression: Compression = GZIP
    stats: PushStats = field(default_factory=PushStats)
    _counting: threading.Lock = field(default_factory=threading.Lock)

    def homes(self, digest: str) -> list[str]:
        """Repositories of the target's registry this store saw holding `digest` (not the target)."""
        found = blob_homes(self.store, digest)
        prefix = f"{self.target.registry}/"
        return [r.removeprefix(prefix) for r in found if r.startswith(prefix) and r != self.target.name]

    def seen(self, digest: str) -> None:
        """Remember that the target's repository holds `digest` (the latest first)."""
        with self._counting:
            remember_homes(self.store, digest, [self.target.name])

    def mounted(self, digests: list[str], sources: dict[str, list[str]] | None = None) -> set[str]:
        """Which of these blobs, absent from the target, a repository of the same registry that holds
        them lent by a cross-repository mount (asked side by side; `sources`: where to look
        besides the repositories this store saw them in)."""
        candidates = {d: list(dict.fromkeys([*(sources or {}).get(d, []), *self.homes(d)])) for d in digests}

        def mount(digest: str) -> bool:
            for repository in candidates[digest]:
                if self.client.mount_blob(self.target, digest, repository):
                    self.seen(digest)
                    return True
            return False

        wanted = [d for d in digests if candidates[d]]
        if not wanted:
            return set()
        with ThreadPoolExecutor(max_workers=min(8, len(wanted))) as pool:
            answers = list(pool.map(mount, wanted))
        lent = {d for d, ok in zip(wanted, answers, strict=True) if ok}
        with self._counting:
            self.stats.layers_mounted += len(lent)
        return lent

    def present(self, digests: list[str]) -> dict[str, int]:
        """Which of these blobs the target has, with the size it gives each: one HEAD each, asked
        side by side."""

        with ThreadPoolExecutor(max_workers=min(8, max(1, len(digests)))) as pool:
            answers = list(pool.map(lambda d: self.client.blob_size(self.target, d), digests))
        return {d: size for d, size in zip(digests, answers, strict=True) if size is not None}

    def sized(self, held: dict[str, int], known: list[tuple[str, int] | None]) -> None:
        """A blob the manifest names without sending it has the size recorded for it, or the push
        stops: a record (a registry cache's description among them) that misstates it would make a
        manifest no client can pull."""
        for item in known:
            if item is not None and held.get(f"sha256:{item[0]}", item[1]) not in (item[1], -1):
                raise RegistryError(f"{self.target.name}: blob sha256:{item[0][:12]} has "
                                    f"{held[f'sha256:{item[0]}']} bytes there, the record says {item[1]}; "
                                    "nothing was pushed",
                                    hint="build without the registry cache's descriptions (--no-registry-cache)")

    def blob(self, digest: str, size: int, opener: Callable[[], IO[bytes]], what: str,
             present: bool | None = None) -> None:
        if present if present is not None else self.client.has_blob(self.target, digest):
            self.seen(digest)
            with self._counting:
                self.stats.layers_existing += 1
            return
        transfer = Transfer(output(), "uploading", what, size) if size > 1 << 20 else None
        self.client.upload_blob(self.target, digest, size,
                                lambda: ProgressReader(opener(), size, transfer))  # type: ignore[arg-type,return-value]
        if transfer is not None:
            transfer.finish()
        self.seen(digest)
        with self._counting:
            self.stats.layers_pushed += 1
            self.stats.bytes_pushed += size
            self.stats.blobs.append(digest)

    def data(self, data: bytes, what: str, present: bool | None = None) -> str:
        digest = sha256_digest(data)
        if not (present if present is not None else self.client.has_blob(self.target, digest)):
            self.client.upload_blob(self.target, digest, len(data), lambda: io.BytesIO(data))
            self.stats.bytes_pushed += len(data)
        return digest

    def base_layers(self, base_ref: str, platform: str, count: int) -> list[tuple[str, int, str]]:
        """Copy the base's layers (as its registry stores them) into the target; their descriptors."""
        if count == 0:
            return []
        source = parse_image_ref(base_ref)
        _, doc, _ = self.client.platform_manifest(source, platform)
        layers = doc.get("layers", [])
        if len(layers) != count:
            raise RegistryError(f"{base_ref}: the registry lists {len(layers)} layers, the engine {count}")
        out = []
        same_registry = source.registry == self.target.registry and source.repository != self.target.repository
        absent = [la["digest"] for la in layers if not self.client.has_blob(self.target, la["digest"])]
        lent = self.mounted(absent, {d: [source.repository] for d in absent}) if same_registry else set()
        for layer in layers:
            digest, size = layer["digest"], int(layer["size"])
            if digest in absent and digest not in lent:  # sent through this machine
                def opener(digest: str = digest) -> IO[bytes]:
                    response = self.client.open_blob(source, digest)
                    return cast(IO[bytes], response.raw)

                self.blob(digest, size, opener, f"base layer {digest[7:19]}")
            elif digest not in absent:
                self.stats.layers_existing += 1
            out.append((digest, size, layer.get("mediaType", OCI_LAYER_GZIP)))
        return out

    def already_there(self, known: list[tuple[str, int] | None]) -> list[tuple[str, int] | None]:
        """Of the layers whose compressed (sha256, size) is recorded, those the registry holds in
        the target repository or mounted from another one (None for the rest, to compress and send)."""
        held = self.present([f"sha256:{k[0]}" for k in known if k is not None])
        self.stats.layers_existing += len(held)
        for digest in held:
            self.seen(digest)
        lent = self.mounted([f"sha256:{k[0]}" for k in known if k is not None and f"sha256:{k[0]}" not in held])
        held.update(self.present(sorted(lent)))
        self.sized(held, known)
        return [k if k is not None and f"sha256:{k[0]}" in held else None for k in known]

    def image(self, layers: list[Layer], config: bytes, base_ref: str | None, platform: str,
              fetch: Callable[[Layer], None] | None = None) -> tuple[str, int]:
        """Upload one platform's image; returns its manifest's (digest, size), not yet tagged.

        A layer whose compressed digest is recorded and which the registry has is neither
        compressed again nor sent; one another repository of the same registry holds (where this
        store pushed or saw it, or the base's own repository) is mounted from there, also without
        being compressed or sent. The others are compressed side by side (one thread per CPU:
        each layer's gzip stream is its own, so the bytes are the same as one at a time) and
        each is uploaded as soon as it is compressed, a few at a time. A layer to compress whose
        bytes the store lacks (a registry's stand-in) is first handed to `fetch`."""
        # the config first: a registry that cannot be reached fails before any layer is compressed
        config_there = self.client.has_blob(self.target, sha256_digest(config))
        base_count = sum(1 for layer in layers if layer.blob is None)
        descriptors = self.base_layers(base_ref, platform, base_count) if base_count and base_ref else []
        ours = layers[base_count:]
        known = [recorded(self.store, layer, self.compression) for layer in ours]
        done = self.already_there(known)
        todo = [i for i, d in enumerate(done) if d is None]
        for i in todo:
            layer = ours[i]
            if fetch is not None and layer.blob is not None and not self.store.has(layer.blob):
                fetch(layer)
        failed = threading.Event()

        def send(digest: str, size: int, source: Callable[[], IO[bytes]], what: str) -> None:
            if failed.is_set():  # another upload failed: this one does not start
                return
            try:
                self.blob(digest, size, source, what)
            except BaseException:
                failed.set()
                raise

        with ThreadPoolExecutor(max_workers=max(1, min(len(todo), os.cpu_count() or 1))) as squeezers, \
                ThreadPoolExecutor(max_workers=UPLOADS) as senders:
            try:
                made = {squeezers.submit(compressed, self.store, ours[i], self.compression): i for i in todo}
                sent: list[Future[None]] = []
                for future in completed(made):
                    for upload in sent:
                        if upload.done():
                            upload.result()  # a failed upload stops the push now, not after every layer
                    index = made[future]
                    sha, size = done[index] = future.result()
                    layer = ours[index]
                    path = self.store.verified(sha, f"compressed {layer.created_by}")
                    sent.append(senders.submit(send, f"sha256:{sha}", size, opener(path), layer.created_by))
                for upload in completed(sent):
                    upload.result()
            except BaseException:
                # nothing queued starts; what is under way ends within its own bounded attempts
                squeezers.shutdown(wait=False, cancel_futures=True)
                senders.shutdown(wait=False, cancel_futures=True)
                raise
        for item in done:
            assert item is not None
            descriptors.append((f"sha256:{item[0]}", item[1], self.compression.media_type))
        config_digest = self.data(config, "config", config_there)
        body = manifest(config_digest, len(config), descriptors)
        digest = self.client.put_manifest(self.target, sha256_digest(body), body, json.loads(body)["mediaType"])
        return digest, len(body)

    def tag(self, tag: str, manifests: list[tuple[str, int, str]]) -> str:
        """Tag one manifest, or an index of several (digest, size, platform)."""
        if len(manifests) == 1:
            digest, size, _ = manifests[0]
            _, media_type, body = self.client.manifest(ImageRef(self.target.registry, self.target.repository, None,
                                                                digest))
            return self.client.put_manifest(self.target, tag, body, media_type)
        body = index([{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d, "size": s,
                       "platform": platform_of(p)} for d, s, p in manifests])
        try:
            return self.client.put_manifest(self.target, tag, body, "application/vnd.oci.image.index.v1+json")
        except RegistryError as exc:
            raise RegistryError(f"{self.target.name}:{tag}: the registry refused the image index that ties the "
                                f"platforms together ({exc.message})",
                                hint="the registry may not support OCI image indexes; push one platform "
                                     "(--platform) per tag instead") from None

    def confirm(self, tag: str, digest: str) -> None:
        ref = ImageRef(self.target.registry, self.target.repository, tag, None)
        served = self.client.head_digest(ref)
        if served != digest:
            raise RegistryError(f"{self.target.name}:{tag}: pushed {digest} but the registry answers {served}; "
                                "nothing recorded")
        actual, _, _ = self.client.manifest(ref)
        if actual != digest:
            raise RegistryError(f"{self.target.name}:{tag}: the registry serves a manifest hashing to {actual}; "
                                "nothing recorded")
