"""What one build run holds (the store, the engine, its builder sites, the registry cache) and
what it made so far; the executor's chains, components and image work on it."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.core.platforms import HOST
from enginebuild.execution.buildkit import Builder
from enginebuild.execution.fetch import Fetcher
from enginebuild.execution.outputs import OutputRecord
from enginebuild.execution.secretscan import Scanner
from enginebuild.execution.sites import HOST_PLATFORM, LOCAL, BuilderSpec, Site
from enginebuild.io.git import Mirrors
from enginebuild.io.http import Http
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.oci.engine import Engine, EngineApi
from enginebuild.oci.image import Layer
from enginebuild.plan.model import ComponentNode, ImagePlan, LayerNode
from enginebuild.plan.stored import layer_blobs, record_key
from enginebuild.registrycache.cache import LayerCache
from enginebuild.registrycache.compilercache import CompilerCaches
from enginebuild.sources.base import Context
from enginebuild.state.history import BuildHistory

COMPONENT_REPO = "enginebuild/component"
RAW_REPO = "enginebuild/raw"


@dataclass
class Outcome:
    built: list[str] = field(default_factory=list)  # components and command layers run here
    written: list[str] = field(default_factory=list)  # layers enginebuild wrote
    pulled: list[str] = field(default_factory=list)  # from the registry cache
    substituted: list[str] = field(default_factory=list)  # stood in by the cache's description (substitutes.py)
    reused: int = 0
    preloaded: int = 0  # layers of the runtime loaded into the engine while its later ones were written
    image_id: str = ""
    builder_called: bool = False
    seconds: dict[str, float] = field(default_factory=dict)
    output_sizes: dict[str, int] = field(default_factory=dict)
    replaced: str | None = None  # the image the tag named before, when this build loaded another
    same_layers: bool = True  # whether that image had this one's layers, in this order
    config: bytes = b""  # the image's config as loaded, and its layers
    layers: list[Layer] = field(default_factory=list)


def local_tags(plan: ImagePlan, platforms: tuple[str, ...]) -> list[str]:
    """The platform-qualified tag, and the plain one for the platform this machine runs (or the only one)."""
    tags = [plan.tags[0]]
    native = str(HOST)
    plain_for = native if native in platforms else platforms[0]
    if plan.platform == plain_for or plan.stand_in:
        tags.append(plan.tags[1])
    return tags


class RunState:
    """What a build run holds: the store, the engine, the builders, the registry cache, what it made."""

    def __init__(self, home: Path, *, scanner: Scanner, engine: EngineApi | None = None, http: Http | None = None,
                 builder_name: str | None = None, verbose: bool = False, cache: LayerCache | None = None,
                 jobs: int | None = None, fresh: bool = False, builders: list[BuilderSpec] | None = None,
                 rebuild: bool = False, mirrors: Mirrors = ()):
        """`scanner`: the search for the spec's declared secrets, which every layer and output
        made here and every blob pushed to the registry cache goes past (there is no build
        without it); `mirrors`: where git sources are fetched from instead (the checkout's)."""
        self.home = Path(home)
        self.mirrors = mirrors
        self.store = Store(home)
        self.engine = engine or Engine()
        self.http = http or Http()
        self.verbose, self.scanner = verbose, scanner
        self.cache = cache.guarded_by(self.searched) if cache is not None else None
        self.jobs = jobs or max(1, min(4, os.cpu_count() or 1))
        self.fetcher = Fetcher(self.store, self.http)
        self.compiler_caches = CompilerCaches(self.store, self.cache)
        # fresh (reproduce): every chain is loaded from what this run made, none taken from the engine
        self.fresh = fresh
        # rebuild (image --no-cache): every component and layer made again in this run, BuildKit's cache unused
        self.rebuild, self.remade = rebuild, set[str]()
        self.stood_in: set[str] = set()  # record keys of layers the registry cache stands in (substitute)
        # the runtime is assembled here; components go to the builders (this engine unless others are named)
        self.local = Site(BuilderSpec(LOCAL, self.engine.endpoint), self.engine, (HOST_PLATFORM,), self.store,
                          buildx_name=builder_name, fresh=fresh or rebuild)
        self.assembler, self.loaded = self.local.assembler, self.local.loaded
        self.builder_specs = builders
        self.sites: list[Site] | None = None  # connected when a component must be built
        self.assigned: dict[str, Site] = {}
        self.reused: list[ComponentNode | LayerNode] = []  # made earlier, used again by this build
        self.history = BuildHistory(self.home)
        self._make_lock = threading.Lock()
        self.outcome = Outcome()
        self.outputs: dict[str, OutputRecord] = {}

    # -- helpers ----------------------------------------------------------------------------
    def searched(self, blobs: list[tuple[str, str]]) -> None:
        """What is about to go to the registry cache (sha256, what made it), searched for every
        declared secret whose value is here, as a layer of the image is (the record of an
        earlier search answers for a blob already searched)."""
        self.scanner.check_layers(blobs, f"{blobs[0][1] if blobs else 'an entry'} (for {self.cache_name})")

    @property
    def cache_name(self) -> str:
        return self.cache.name if self.cache is not None else "the registry cache"

    @property
    def known(self) -> set[str]:
        return self.local.known

    def builder(self, site: Site) -> Builder:
        self.outcome.builder_called = True
        return site.builder()

    def on(self, site: Site) -> str:
        return f" on builder {site.name}" if self.sites and len(self.sites) > 1 else ""

    def ctx(self, mtime: int) -> Context:
        return Context(self.home, self.http, mtime, self.mirrors)

    def secrets(self, names: tuple[str, ...], what: str) -> dict[str, str]:
        values = {n: os.environ[n] for n in names if os.environ.get(n)}
        for name in names:
            if name not in values:
                output().say(f"  note: secret {name} is not set here; {what} sees no /run/secrets/{name}")
        return values

    def made(self, node: LayerNode) -> bool:
        if record_key(node) in self.stood_in:
            return True
        if self.rebuild and record_key(node) not in self.remade:
            return False
        blobs = layer_blobs(self.store, node)
        return blobs is not None and all(self.store.intact(sha, node.name) for sha, _ in blobs)
