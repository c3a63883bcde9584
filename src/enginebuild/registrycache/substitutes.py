"""Layers a registry already holds, standing in for layers this machine has not made (what Nix
calls a substituter).

After a push, the registry cache is told, per layer key, what the layer is (its diff IDs and
sizes), its compressed forms (per compression, digest and size) and the repositories that hold
them, and which declared secrets it was searched for where it was made: an entry of a few
hundred bytes, `CACHE:KEY-sub`. A run that builds without loading the image (`--no-load`, the
CI job) and finds such an entry for every layer it lacks takes them instead of making anything:
no component built, no wheel or `.deb` downloaded; the image's config is written from the
recorded diff IDs and its push mounts the compressed blobs from their repositories (or copies
them from another registry). The layer's own bytes are fetched (its compressed blob, unpacked
and checked against its diff ID) only where something must read them: a check with no recorded
verdict, a declared secret to search for here, a load into the engine.

The checks that read an image's bytes (kernel architectures, runtime closure) record their
verdict in the cache under the image's config and the spec's check settings (`CACHE:KEY-ok`),
so a run that substituted every layer reports the verdict of the run that checked those bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import IO, TYPE_CHECKING, cast

import zstandard  # type: ignore[import-untyped,unused-ignore]

from enginebuild.errors import BuildFailed, RegistryError
from enginebuild.io.store import Store
from enginebuild.oci.push import blob_homes, remember_homes
from enginebuild.oci.reference import ImageRef, parse_image_ref
from enginebuild.oci.registry import RegistryClient
from enginebuild.plan.model import ComponentNode, ImagePlan, LayerNode
from enginebuild.plan.stored import layer_blobs, put_layer_blobs, record_key
from enginebuild.registrycache.cache import EMPTY_TYPE, LayerCache
from enginebuild.registrycache.cacherecords import DESCRIBED, FORMS, SUBSTITUTE, VERDICT
from enginebuild.registrycache.inert import inert, said
from enginebuild.wire import JsonDoc, loads

OUTPUTS = DESCRIBED  # a component's outputs record, without its bytes (the store's record kind too)
VERDICT_VERSION = 2  # keyed by the layers the checks read (registrycache/inert.py)

if TYPE_CHECKING:
    import requests  # loaded by oci/registry.py when a registry is reached


def _entry(cache: LayerCache, store: Store, key: str, kind: str, record: JsonDoc) -> None:
    empty = store.put_bytes(b"{}", "empty descriptor")
    cache.push_entry(key, kind, record, [(empty.sha256, empty.size, EMPTY_TYPE)], store)


# -- telling the cache -------------------------------------------------------------------------
def describe(store: Store, node: LayerNode) -> JsonDoc | None:
    """What a fresh runner needs to stand this made layer in: None when it is not made here or
    none of its blobs was ever compressed for a registry."""
    blobs = layer_blobs(store, node)
    if not blobs:
        return None
    forms: dict[str, list[list[str | int]]] = {}
    homes: dict[str, list[str]] = {}
    for kind in FORMS:
        made = [store.record(kind, sha) for sha, _ in blobs]
        if all(made):
            forms[kind] = [[str(m["sha256"]), int(m["size"])] for m in made if m]
            for m in made:
                assert m is not None
                held = blob_homes(store, str(m["sha256"]))
                if held:
                    homes[str(m["sha256"])] = held
    if not forms or not homes:
        return None
    searched = sorted(set.intersection(*(set((store.record("secret-checked", sha) or {}).get("secrets", {}))
                                         for sha, _ in blobs)))
    return {"name": node.name, "layers": [list(b) for b in blobs], "forms": forms, "homes": homes,
            "secrets": searched, "inert": [sha for sha, _ in blobs if inert(store, sha) is True]}


def announce(cache: LayerCache, store: Store, plans: list[ImagePlan]) -> int:
    """After a push: every layer of the plans' runtimes described to the cache, and the outputs
    record of every component (what the image's SBOM names); how many layers. A description
    another trusted key signed stays as it is: this machine's key may not be trusted where it is
    read (a fork's pull request), and replacing it would send every later runner back to the blobs."""
    if not cache.push_enabled:
        return 0
    told = 0
    for plan in plans:
        for comp in plan.components:
            outputs = store.record("outputs", comp.key)
            if outputs is not None and not cache.has(f"{comp.key}-sub"):
                _entry(cache, store, f"{comp.key}-sub", OUTPUTS, {"record": outputs})
        for node in plan.runtime.layers:
            record = describe(store, node)
            if record is not None and not cache.held_by_another(f"{record_key(node)}-sub"):
                _entry(cache, store, f"{record_key(node)}-sub", SUBSTITUTE, record)
                told += 1
    return told


# -- taking from the cache ---------------------------------------------------------------------
def take(cache: LayerCache, store: Store, node: LayerNode) -> bool:
    """Stand the cache's description of `node` in for it (no blob fetched): its layer record,
    its compressed forms, where they are held, what it was searched for. False when the cache
    has none (or one that does not parse)."""
    key = f"{record_key(node)}-sub"
    if not cache.has(key):
        return False
    record = cache.fetch_entry(key, SUBSTITUTE, store)  # signed by a trusted key, of its kind's shape
    if record is None:
        return False
    blobs = [(str(s), int(n)) for s, n in record["layers"]]
    for kind, made in record["forms"].items():
        if kind in FORMS:
            for (sha, _), (csha, csize) in zip(blobs, made, strict=True):
                store.put_record(kind, sha, {"sha256": str(csha), "size": int(csize)})
    for csha, repositories in record["homes"].items():
        remember_homes(store, csha, repositories)
    for sha, _ in blobs:  # searched where it was made: a push without the value here takes that word
        mine = dict((store.record("secret-checked", sha) or {}).get("secrets", {}))
        mine.update({str(n): "searched where it was made" for n in record.get("secrets", []) if n not in mine})
        store.put_record("secret-checked", sha, {"secrets": mine})
    for sha in record.get("inert", []):  # blobs the checks read nothing in (registrycache/inert.py)
        said(store, str(sha))
    put_layer_blobs(store, node, blobs, {"substitute": cache.name})
    return True


def take_outputs(cache: LayerCache, store: Store, comp: ComponentNode) -> bool:
    """The outputs record of a component this run does not build (for the SBOM), kept as
    `outputs-described`: its bytes are not here."""
    if store.record("outputs", comp.key) is not None:
        return True
    record = cache.fetch_entry(f"{comp.key}-sub", OUTPUTS, store) if cache.has(f"{comp.key}-sub") else None
    described = (record or {}).get("record")
    if not isinstance(described, dict):
        return False
    store.put_record(OUTPUTS, comp.key, described)
    return True


def outputs_of(store: Store, comp: ComponentNode) -> JsonDoc | None:
    """A component's outputs record: made or taken here, else as a registry described it."""
    return store.record("outputs", comp.key) or store.record(OUTPUTS, comp.key)


def substituted(store: Store, node: LayerNode) -> bool:
    """Whether `node`'s record stands in for a layer whose bytes this store lacks."""
    record = store.record("layers", record_key(node))
    return bool(record and record.get("substitute")) and not all(
        store.has(sha) for sha, _ in layer_blobs(store, node) or ())


# -- fetching the bytes where they must be read ------------------------------------------------
def _compressed(store: Store, sha: str) -> Iterator[tuple[str, str, int, list[str]]]:
    """(form, compressed digest, its size, repositories holding it) for a stored layer blob."""
    for kind in FORMS:
        made = store.record(kind, sha)
        if made:
            csha = str(made["sha256"])
            yield kind, csha, int(made["size"]), blob_homes(store, csha)


class _Counted:
    """The body of a blob response, read as a file: hashed, and refused past `limit` bytes."""

    def __init__(self, response: requests.Response, limit: int, what: str):
        self.raw, self.limit, self.what = response.raw, limit, what
        self.digest, self.count = hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size if size >= 0 else 1 << 20, decode_content=True)
        self.count += len(data)
        if self.count > self.limit:
            raise RegistryError(f"{self.what} is longer than the {self.limit} bytes recorded for it")
        self.digest.update(data)
        return bytes(data)

    def drain(self) -> None:
        while self.read(1 << 20):
            pass


def _unpacking(kind: str, packed: _Counted) -> gzip.GzipFile | zstandard.ZstdDecompressionReader:
    """A reader of what the compressed blob unpacks to, a bounded block at a time."""
    if kind.startswith("zstd"):
        return zstandard.ZstdDecompressor().stream_reader(cast(IO[bytes], packed), read_across_frames=True)
    return gzip.GzipFile(fileobj=cast(IO[bytes], packed), mode="rb")  # gzip, by zlib or ISA-L


UNPACK_ERRORS = (RegistryError, ValueError, OSError, EOFError, zlib.error, zstandard.ZstdError)


def realize(store: Store, node: LayerNode, client: RegistryClient | None = None) -> None:
    """Fetch the bytes of a substituted layer: its compressed blob from a repository that holds
    it, unpacked into the store and checked against the diff ID (the compressed bytes read no
    further than their recorded size, the unpacked ones no further than the layer's)."""
    client = client or RegistryClient()
    for sha, size in layer_blobs(store, node) or ():
        if store.check(sha, node.name):
            continue
        problems = []
        for kind, csha, csize, repositories in _compressed(store, sha):
            for repository in repositories:
                try:
                    _fetch(client, store, parse_image_ref(repository), kind, (f"sha256:{csha}", csize), (sha, size))
                    break
                except UNPACK_ERRORS as exc:
                    problems.append(f"{repository}: {exc}")
            if store.has(sha):
                break
        if not store.has(sha):
            raise BuildFailed(f"layer {node.name}: its bytes are held nowhere reachable ("
                              + ("; ".join(problems) or "no repository recorded") + ")",
                              hint="build it here: drop the substitute with `image --no-registry-cache`")


def realize_all(store: Store, nodes: Iterable[LayerNode]) -> None:
    """`realize` for every substituted layer of `nodes`, one per CPU at a time (each its own
    download and unpacking stream); the first failure is raised."""
    todo = [node for node in nodes if substituted(store, node)]
    if not todo:
        return
    client = RegistryClient()
    with ThreadPoolExecutor(max_workers=max(1, min(len(todo), os.cpu_count() or 1))) as pool:
        for future in [pool.submit(realize, store, node, client) for node in todo]:
            future.result()


def _fetch(client: RegistryClient, store: Store, repository: ImageRef, kind: str, packed_blob: tuple[str, int],
           layer: tuple[str, int]) -> None:
    (digest, packed_size), (sha, size) = packed_blob, layer
    with client.open_blob(repository, digest) as response, store.ingest(f"layer {sha[:12]}") as sink:
        packed = _Counted(response, packed_size, f"blob {digest[:19]}")
        with _unpacking(kind, packed) as unpacked:
            while block := unpacked.read(1 << 20):
                if sink.size + len(block) > size:
                    raise RegistryError(f"blob {digest[:19]} unpacks to more than the {size} bytes of layer "
                                        f"sha256:{sha[:12]}")
                sink.write(block)
        packed.drain()
        if f"sha256:{packed.digest.hexdigest()}" != digest or sink.size != size or sink.hexdigest() != sha:
            raise RegistryError(f"blob {digest[:19]} does not unpack to layer sha256:{sha[:12]}")


# -- verdicts of the checks that read the bytes ------------------------------------------------
def verdict_key(settings: object, platform: str, config: bytes, store: Store) -> str:
    """What the checks read of the image (the diff IDs of its layers but the inert ones, its
    environment, its platform) and what they were asked (`settings`, a deterministic repr of the
    spec's check settings)."""
    doc = loads(config)
    diff_ids = [str(d) for d in (doc.get("rootfs") or {}).get("diff_ids") or []]
    read = [d for d in diff_ids if inert(store, d.removeprefix("sha256:")) is not True]
    doc = {"v": VERDICT_VERSION, "layers": read, "env": (doc.get("config") or {}).get("Env"),
           "os": doc.get("os"), "architecture": doc.get("architecture"), "variant": doc.get("variant"),
           "platform": platform, "settings": repr(settings)}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def put_verdict(cache: LayerCache, store: Store, key: str, lines: dict[str, str]) -> None:
    if cache.push_enabled and not cache.has(f"{key}-ok"):
        _entry(cache, store, f"{key}-ok", VERDICT, {"lines": dict(lines)})


def verdict(cache: LayerCache, store: Store, key: str) -> dict[str, str] | None:
    if not cache.has(f"{key}-ok"):
        return None
    record = cache.fetch_entry(f"{key}-ok", VERDICT, store)
    lines = (record or {}).get("lines")  # printable lines, no workflow command (cacherecords.verdict)
    return {str(k): str(v) for k, v in lines.items()} if isinstance(lines, dict) else None
