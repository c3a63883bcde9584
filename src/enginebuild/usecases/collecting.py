"""`gc`: what the store and the engine hold that no image needs any more, found by reachability
from the plans (as Nix's garbage collector keeps what its roots reach).

The roots are the current plans of every image of the catalogue, for every platform, and the
last build of each image this machine made (the build history). Every 64-hex digest or key they
hold is live; a record named by a live key is live, and so is every digest it names (a layer
record names its blobs, an outputs record its tar and wheels), to a fixed point. A stored blob
or record that is not live goes; so do the engine's chain and component tags whose keys are not
live and that this store made (execution/enginetags.py: another store's tags on a shared engine are
left, and counted), and, asked for (`gc --cache`), the registry cache's entries whose keys are
not live.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild.errors import EngineBuildError
from enginebuild.execution import enginetags
from enginebuild.io.store import Store
from enginebuild.lock.lockfile import read_lock
from enginebuild.lock.perbuild import committed_key
from enginebuild.oci.engine import Engine
from enginebuild.oci.reference import ImageRef
from enginebuild.oci.registry import RegistryClient
from enginebuild.plan.image import plan_image
from enginebuild.registrycache.cache import parse_cache_repo
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.plan.model import ImagePlan

HEX64 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
ENGINE_REPOS = ("enginebuild/chain", "enginebuild/component")


@dataclass
class Garbage:
    blobs: list[tuple[Path, int]] = field(default_factory=list)
    records: list[Path] = field(default_factory=list)
    tags: list[tuple[str, int]] = field(default_factory=list)  # engine refs and their images' sizes
    others: list[str] = field(default_factory=list)  # unneeded here, but made by another store: left
    engine: str = ""  # the engine looked at ("" when it was not reached)
    engine_at: str = ""  # where it was looked for
    kept_blobs: int = 0
    kept_bytes: int = 0
    unplanned: list[str] = field(default_factory=list)  # images that could not be planned (kept by history)
    build_locks: list[Path] = field(default_factory=list)  # per-build locks made over another committed lock

    @property
    def blob_bytes(self) -> int:
        return sum(size for _, size in self.blobs)


def _strings(value: object) -> Iterable[str]:
    """Every string inside a plan (dataclasses, tuples, mappings), keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        return
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _strings(getattr(value, f.name))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _strings(item)


def catalogue_plans(ws: Workspace) -> tuple[list[ImagePlan], list[str]]:
    """The current plan of every image of the catalogue for each of its platforms, and the
    images that cannot be planned here (their lock, say)."""

    plans, unplanned = [], []
    for name in ws.buildable():
        try:
            spec = ws.spec(name)
            lock = ws.lock(spec)
            plans += [plan_image(spec, lock, platform, ws.plan_options()) for platform in spec.platforms]
        except EngineBuildError:
            unplanned.append(name)
    return plans, unplanned


def roots(ws: Workspace) -> tuple[set[str], list[str]]:
    """The live digests and keys of every image's plans and of the build history, and the images
    that could not be planned."""
    plans, unplanned = catalogue_plans(ws)
    live = {m for plan in plans for text in _strings(plan) for m in HEX64.findall(text)}
    history = Path(ws.home) / "history"
    for path in history.glob("*.json") if history.is_dir() else ():
        live.update(HEX64.findall(path.read_text(errors="replace")))
    return live, unplanned


def closure(store: Store, live: set[str]) -> set[str]:
    """`live` and every digest the records named by a live key name, to a fixed point."""
    by_key: dict[str, list[Path]] = {}
    for path in store.records.glob("*/*.json") if store.records.is_dir() else ():
        by_key.setdefault(path.stem, []).append(path)
    todo = [k for k in live if k in by_key]
    seen: set[str] = set()
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        for path in by_key.get(key, ()):
            for found in HEX64.findall(path.read_text(errors="replace")):
                if found not in live:
                    live.add(found)
                    if found in by_key:
                        todo.append(found)
    return live


def find_garbage(ws: Workspace) -> Garbage:
    store = Store(ws.home)
    live, unplanned = roots(ws)
    live = closure(store, live)
    out = Garbage(unplanned=unplanned)
    cas = store.root
    for path in sorted(cas.glob("*/*")) if cas.is_dir() else ():
        if not HEX64.fullmatch(path.name):
            continue
        size = path.stat().st_size
        if path.name in live:
            out.kept_blobs += 1
            out.kept_bytes += size
        else:
            out.blobs.append((path, size))
    out.build_locks = stale_build_locks(ws)
    engine = Engine(timeout=30)
    out.engine_at = engine.endpoint.describe()
    present: set[str] | None = None  # the engine's enginebuild tags (None: not reached)
    if engine.ping():
        out.engine = engine.endpoint.describe()
        present = set()
        for repo in ENGINE_REPOS:
            for tag in sorted(engine.tags_of(repo)):
                present.add(tag)
                if tag in live:
                    continue
                ref = f"{repo}:{tag}"
                if not enginetags.ours(store, ref):
                    out.others.append(ref)
                    continue
                found = engine.inspect(ref) or {}
                out.tags.append((ref, int(found.get("Size") or 0)))
    for path in sorted(store.records.glob("*/*.json")) if store.records.is_dir() else ():
        if not HEX64.fullmatch(path.stem) or path.stem in live:
            continue
        if path.parent.name == enginetags.KIND and (present is None or path.stem in present):
            continue  # which tags are this store's: kept while the tag may be there (gone next time)
        out.records.append(path)
    return out


def stale_build_locks(ws: Workspace) -> list[Path]:
    """The per-build locks (`--set`, lock/perbuild.py) made over a committed lock that is no
    longer the one in lockfiles/: no command reads them again."""
    folder = Path(ws.home) / "locks"
    if not folder.is_dir():
        return []
    current = set()
    for name in ws.buildable():
        try:
            committed = read_lock(ws.root, ws.spec(name))
        except EngineBuildError:
            continue
        if committed is not None:
            current.add(committed_key(committed))
    out = []
    for path in sorted(folder.glob("*.lock")):
        parts = path.stem.rsplit("-", 2)
        if len(parts) != 3 or parts[1] not in current:
            out.append(path)
    return out


def cache_garbage(ws: Workspace, cache_repo: str) -> list[str]:
    """The tags of the registry cache (CACHE:KEY entries, the KEY-sub descriptions of
    registrycache/substitutes.py, the cc-KEY compiler caches of registrycache/compilercache.py, KEY a
    component's cache key) whose keys no root reaches. Verdicts (KEY-ok, a few hundred bytes,
    keyed by an image's config) are kept."""

    live = closure(Store(ws.home), roots(ws)[0])
    repo = parse_cache_repo(cache_repo)
    keys = {tag: tag.removeprefix("cc-").removesuffix("-sub") for tag in RegistryClient().tags(repo)}
    return sorted(tag for tag, key in keys.items() if HEX64.fullmatch(key) and key not in live)


def collect_cache(cache_repo: str, tags: list[str]) -> int:
    """Delete those entries from the cache repository (the registry reclaims their blobs in its own
    garbage collection); returns how many."""

    repo, client = parse_cache_repo(cache_repo), RegistryClient()
    done = 0
    for tag in tags:
        digest = client.head_digest(ImageRef(repo.registry, repo.repository, tag, None))
        if digest:
            client.delete_manifest(repo, digest)
            done += 1
    return done


def collect(ws: Workspace, garbage: Garbage) -> list[str]:
    """Remove what `find_garbage` found; returns the engine refs that could not be removed (in use)."""

    for path, _ in garbage.blobs:
        path.unlink(missing_ok=True)
        path.with_name(f".{path.name}.lock").unlink(missing_ok=True)  # its fetch's mutex file
    for path in garbage.records:
        path.unlink(missing_ok=True)
    for path in garbage.build_locks:
        path.unlink(missing_ok=True)
    kept = []
    engine = Engine(timeout=120)
    store = Store(ws.home)
    for ref, _ in garbage.tags:
        try:
            engine.remove(ref)
        except EngineBuildError:
            kept.append(ref)
            continue
        enginetags.forget(store, ref)
    return kept


def store_size(home: Path) -> tuple[int, int]:
    """(blobs, bytes) the store holds."""
    cas = Store(home).root
    sizes = [p.stat().st_size for p in cas.glob("*/*") if HEX64.fullmatch(p.name)] if cas.is_dir() else []
    return len(sizes), sum(sizes)
