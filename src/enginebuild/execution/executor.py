"""Walking a plan: build what is missing, reuse what is recorded, assemble the image.

Components first (independent ones at the same time), each on its builder environment;
then the runtime's layers in order; then the image, loaded into the engine with the config
enginebuild writes. Nothing is recorded for a node that failed; what was made is kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import platform as host
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from enginebuild.errors import BuilderLost, BuildFailed, UserError
from enginebuild.execution import enginetags
from enginebuild.execution.assemble import SCRATCH, Assembler
from enginebuild.execution.buildkit import Builder, run_build
from enginebuild.execution.fetch import STOP_WAIT_S, Fetcher, Prefetch, component_downloads, git_wheels, layer_downloads
from enginebuild.execution.layers import LayerMaker, cut_new_layers, normalize_into_store, remove_folder, scratch_folder
from enginebuild.execution.materialize import Materializer
from enginebuild.execution.outputs import OutputRecord, export_outputs, release_outputs
from enginebuild.execution.preload import Preloader
from enginebuild.execution.secretscan import Scanner
from enginebuild.execution.sites import HOST_PLATFORM, LOCAL, BuilderSpec, Site, assign, capable, connect
from enginebuild.io import proc
from enginebuild.io.background import Background, settled
from enginebuild.io.git import Mirrors
from enginebuild.io.http import Http
from enginebuild.io.progress import Work, human_bytes, output
from enginebuild.io.store import Store
from enginebuild.oci.engine import Engine, EngineApi, EngineUnavailable
from enginebuild.oci.image import ImageConfig, Layer, image_id_of
from enginebuild.plan.envs import CHAIN_REPO, parent_ref
from enginebuild.plan.model import ComponentNode, EnvNode, ImagePlan, LayerNode
from enginebuild.plan.stored import layer_blobs, put_layer_blobs, record_key
from enginebuild.registrycache import substitutes
from enginebuild.registrycache.cache import LayerCache
from enginebuild.registrycache.compilercache import CompilerCaches
from enginebuild.sources.base import Context
from enginebuild.state.history import BuildHistory

COMPONENT_REPO = "enginebuild/component"
RAW_REPO = "enginebuild/raw"
HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(host.machine(), host.machine())


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
    config: bytes = b""  # the image's config as loaded, and its layers
    layers: list[Layer] = field(default_factory=list)


def local_tags(plan: ImagePlan, platforms: tuple[str, ...]) -> list[str]:
    """The platform-qualified tag, and the plain one for the platform this machine runs (or the only one)."""
    tags = [plan.tags[0]]
    native = f"linux/{HOST_ARCH}"
    plain_for = native if native in platforms else platforms[0]
    if plan.platform == plain_for or plan.stand_in:
        tags.append(plan.tags[1])
    return tags


def stands_alone(node: LayerNode) -> bool:
    """A layer enginebuild writes from its own inputs only (not from the chain below it)."""
    return node.payload.stands_alone()


def read_prefix(env: EnvNode, index: int) -> EnvNode:
    """The chain a layer that reads the chain below it reads: the whole of it, or the prefix its
    payload names (`reads_below`) where that prefix has something to run in."""
    parent = env.prefix(env.layers[index - 1].chain) if index else env.prefix(env.root)
    at = env.layers[index].payload.reads_below()
    if not at or at == parent.tip:
        return parent
    prefix = parent.prefix(at)
    return prefix if prefix.layers or prefix.base is not None else parent


class LayerBoard:
    """What a chain's `Work` line says: how many layers are done, which are being made."""

    def __init__(self, work: Work, total: int):
        self.work, self.total, self.done = work, total, 0
        self.active: dict[str, None] = {}
        self.lock = threading.Lock()

    def running(self, name: str, make: Callable[..., None], *args: Any) -> None:
        with self.lock:
            self.active[name] = None
            self.show()
        try:
            make(*args)
        finally:
            with self.lock:
                self.done += 1
                self.active.pop(name, None)
                self.show()

    def show(self) -> None:
        self.work.detail = f"{self.done} of {self.total} made; making {', '.join(self.active)}"[:150]


class Executor:
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

    # -- chains ---------------------------------------------------------------------------
    def make_chain(self, env: EnvNode, plan: ImagePlan, site: Site | None = None, preload: bool = False) -> None:
        """Make every layer of an environment that is not made yet, in order (commands run on `site`).
        Layers enginebuild writes that read nothing of the chain below them are written `jobs` at
        a time (their bytes depend only on their inputs); a command layer, an overlay patch or a
        replacement of base files waits for everything below it. With `preload`, the prefixes made
        so far are loaded into the engine while the rest are written (execution/preload.py)."""
        site = site or self.local
        made = [self.made(node) for node in env.layers]
        self.outcome.reused += sum(1 for node, done in zip(env.layers, made, strict=True)
                                   if done and record_key(node) not in self.stood_in)
        self.reused += [node for node, done in zip(env.layers, made, strict=True)
                        if done and node.by_command and record_key(node) not in self.stood_in]
        if all(made):
            return  # no thread started for a chain that is already made
        ahead = [d for node, done in zip(env.layers, made, strict=True)
                 if not done and not node.by_command for d in layer_downloads(node)]
        writing: list[tuple[int, Future[None]]] = []
        loader = Preloader(site, env, self.scanner, f"image {plan.image} ({plan.platform})") \
            if preload and not site.remote else None
        # while the engine loads, one CPU is left to it (here, 2 CPUs: 132 s with one writer and the
        # loads beside it, 142 s with two writers and one load at the end, 159 s with two and the loads)
        writers = Background(min(self.jobs, (os.cpu_count() or 2) - 1) if loader else self.jobs, "enginebuild-layer")
        try:
            with Prefetch(self.fetcher, ahead) as prefetch, Work(output(), f"[{plan.platform}] layers") as work:
                board = LayerBoard(work, made.count(False))
                for index, node in enumerate(env.layers):
                    if made[index]:
                        continue
                    if stands_alone(node):
                        writing.append((index, writers.submit(functools.partial(
                            board.running, node.name, self.write_layer, env, index, plan, site, prefetch))))
                        continue
                    self.written(env, writing, loader)
                    board.running(node.name, self.make_layer, env, index, plan, site, prefetch)
                    if loader:
                        loader.offer(index)
                self.written(env, writing, loader)
            if loader:
                loader.finish()
                self.outcome.preloaded = loader.upto
        except BaseException:
            # a failure, Ctrl-C or SIGTERM: the writers still at work stop at their next file and remove
            # what they staged (wheels unpacked in memory, partial blobs) before the process leaves
            writers.cancel(wait_s=STOP_WAIT_S)
            raise
        finally:
            writers.cancel()
            if loader:
                loader.cancel()

    def written(self, env: EnvNode, writing: list[tuple[int, Future[None]]], loader: Preloader | None) -> None:
        """Wait for the layers being written; recorded in chain order (the first failure raised),
        each prefix offered to the loader as it is complete."""
        for index, future in writing:
            settled(future)
            self.record_written(env.layers[index])
            if loader:
                loader.offer(index)
        writing.clear()

    def record_written(self, node: LayerNode) -> None:
        self.remade.add(record_key(node))
        self.outcome.written.append(node.name)

    def make_layer(self, env: EnvNode, index: int, plan: ImagePlan, site: Site, prefetch: Prefetch) -> None:
        node = env.layers[index]
        parent = env.prefix(env.layers[index - 1].chain) if index else env.prefix(env.root)
        if node.by_command:
            if self.cache is not None and self.cache.pull_layer(node, self.store):
                self.outcome.pulled.append(node.name)
                return
            self.run_layer(parent, node, plan, site)
            if self.cache is not None:
                self.cache.push_layer(node, self.store)
        else:
            self.write_layer(env, index, plan, site, prefetch)
            self.record_written(node)

    def write_layer(self, env: EnvNode, index: int, plan: ImagePlan, site: Site, prefetch: Prefetch) -> None:
        node = env.layers[index]
        parent = env.prefix(env.layers[index - 1].chain) if index else env.prefix(env.root)
        prefetch.wait(layer_downloads(node))
        read = read_prefix(env, index)
        image = self.load_chain(read, site) if node.payload.reads_chain else None
        whole = (lambda: self.whole_chain(parent, site)) if read.layers != parent.layers else None
        maker = LayerMaker(self.store, site.engine, site.assembler, plan.epoch, plan.image, self.outputs,
                           self.mirrors)
        blobs = maker.make(node, image, whole)
        if node.payload.reads_chain:
            output().say(f"  {node.name}: {node.payload.chain_work()} ({human_bytes(sum(s for _, s in blobs))})")

    def load_chain(self, env: EnvNode, site: Site | None = None) -> str:
        """The environment as an image in a builder's engine (to build on or read from); returns its reference."""
        site = site or self.local
        with site.chain_lock:
            if not env.layers:
                if env.base is None:
                    raise BuildFailed("nothing to build on: the chain is empty")
                site.assembler.ensure_pulled(env.base.ref)
                return env.base.ref
            if not site.assembler.holds(env, site.known):
                config = site.assembler.config_for(env)
                site.assembler.load(env, config, [], site.known)
                site.loaded.append(f"{CHAIN_REPO}:{env.tip}")
            return f"{CHAIN_REPO}:{env.tip}"

    def whole_chain(self, env: EnvNode, site: Site) -> str:
        """`load_chain`, its stood-in layers first taken from the cache."""
        substitutes.realize_all(self.store, env.layers)
        return self.load_chain(env, site)

    def forget_loaded_chains(self) -> None:
        """Untag the chains this run loaded (reproduce: the next build loads its own again)."""
        for site in {id(s): s for s in [self.local, *(self.sites or ())]}.values():
            for tag in site.loaded:
                site.engine.remove(tag)
            site.loaded.clear()

    def run_layer(self, parent: EnvNode, node: LayerNode, plan: ImagePlan, site: Site) -> None:
        payload = node.payload.commands()
        if payload is None:
            raise BuildFailed(f"layer {node.name}: no commands to run")
        self.fetcher.all(layer_downloads(node))
        self.load_chain(parent, site)
        tag = f"{RAW_REPO}:{node.chain}"
        label = f"[{plan.platform}] {node.name}" + (f" ({node.where})" if node.where else "")
        materializer = Materializer(self.ctx(plan.epoch), plan.image)
        result = run_build(self.builder(site), tag=tag, platform=plan.platform,
                           context=lambda out: materializer.write_context(out, payload.dockerfile, payload.context),
                           secrets=self.secrets(payload.secrets, node.name), label=label, image=plan.image,
                           log_path=self.home / "logs" / f"{plan.image.replace(':', '--')}-{node.chain[:12]}.log",
                           expected_s=self.history.seconds(node.name), verbose=self.verbose,
                           engine_alive=site.engine.ping)
        folder = scratch_folder(self.store)
        try:
            parent_layers = site.assembler.layers(parent)
            raws = cut_new_layers(site.engine, tag, {layer.size: 1 for layer in parent_layers}, len(parent_layers),
                                  folder)
            if self.scanner.declared:  # whatever step declared them
                self.scanner.check_files(raws, self.scanner.values(), node.name)
            blobs = [normalize_into_store(self.store, raw, plan.epoch, node.name) for raw in raws]
        except BaseException:
            site.engine.remove(tag, force=True)
            raise
        finally:
            remove_folder(folder)
        put_layer_blobs(self.store, node, [(b.sha256, b.size) for b in blobs], {"seconds": result.seconds})
        self.remade.add(record_key(node))
        site.engine.remove(tag, force=True)
        self.history.remember_seconds(node.name, result.seconds)
        self.outcome.built.append(node.name)
        self.outcome.seconds[node.name] = result.seconds
        output().done(f"  {label}: built in {result.seconds:.1f}s{self.on(site)} ({len(blobs)} layer(s) normalised)")

    # -- components -------------------------------------------------------------------------
    def output_record(self, comp: ComponentNode) -> OutputRecord | None:
        """The outputs of `comp` kept in the store, when they are whole (and not to be made again)."""
        if self.rebuild and comp.key not in self.remade:
            return None
        record = output_record(self.store, comp.key)
        if record and self.store.check(record.sha256, f"outputs of {comp.name}") and all(
                self.store.has(sha) for _, sha, _ in record.wheels):
            return record
        return None

    def available(self, comp: ComponentNode) -> bool:
        """Whether a component's outputs are here or in the registry cache (nothing to build)."""
        return self.output_record(comp) is not None or (self.cache is not None and self.cache.has(comp.key))

    def component(self, comp: ComponentNode, plan: ImagePlan) -> None:
        record = self.output_record(comp)
        if record is None and self.cache is not None and self.cache.pull_output(comp, self.store):
            record = self.output_record(comp)
            if record is not None:
                self.outcome.pulled.append(f"component {comp.name}")
        if record is None and comp.release is not None:  # nothing to build: the release's file is the output
            self.fetcher.all(component_downloads(comp))
            pin = comp.release
            record = release_outputs(self.store, comp.name, (pin.filename, pin.sha256, pin.size), plan.epoch)
            self.store.put_record("outputs", comp.key, record.to_json())
            output().done(f"  [{plan.platform}] component {comp.name}: the release's wheel {pin.filename} "
                          f"({human_bytes(record.size)}), built nowhere")
            if self.cache is not None:  # a fresh runner then stands in what is made of it without the index
                self.cache.push_output(comp, self.store)
        elif record is None:
            for name in comp.needs:  # one the registry cache said it had and then did not give
                need = plan.component(name)
                if need.key not in self.outputs:
                    self.component(need, plan)
            record = self.build_elsewhere_if_lost(comp, plan)
            if self.cache is not None:
                self.cache.push_output(comp, self.store)
        else:
            self.outcome.reused += 1
            self.reused.append(comp)
        self.outputs[comp.key] = record
        self.outcome.output_sizes[comp.name] = record.size

    def build_elsewhere_if_lost(self, comp: ComponentNode, plan: ImagePlan) -> OutputRecord:
        """Build on the assigned builder; if that engine stops answering, once more on another
        that can build the platform (what the lost one made is not trusted: nothing was recorded)."""
        site = self.assigned.get(comp.name) or self.local
        if site.lost:  # lost before this component started: it goes elsewhere, as planned work would
            site = self.replacement(comp, site, plan) or site
            output().say(f"  component {comp.name}: on builder {site.name} instead")
        try:
            return self.build_component(comp, plan, site)
        except (BuilderLost, EngineUnavailable) as exc:
            other = None if site.alive() else self.replacement(comp, site, plan)
            if other is None:
                raise
            output().say(f"  builder {site.name} stopped answering while building component {comp.name} "
                         f"({exc.message.splitlines()[0]}); building it again on builder {other.name}")
            return self.build_component(comp, plan, other)

    def replacement(self, comp: ComponentNode, lost: Site, plan: ImagePlan) -> Site | None:
        """Another builder for a lost one's component: the capable one with the fewest assigned."""
        others = [s for s in capable(self.sites or [], plan.platform) if s is not lost]
        if not others:
            return None
        other = min(others, key=lambda s: sum(1 for a in self.assigned.values() if a is s))
        self.assigned[comp.name] = other
        return other

    def build_component(self, comp: ComponentNode, plan: ImagePlan, site: Site) -> OutputRecord:
        with self._make_lock:  # made already, unless the cache was expected to have the outputs
            self.make_chain(comp.builder, plan, site)
        self.fetcher.all(component_downloads(comp))
        parent = self.load_chain(comp.builder, site)
        assert parent == parent_ref(comp.builder) or parent.startswith(CHAIN_REPO)
        tag = f"{COMPONENT_REPO}:{comp.key}"
        label = f"[{plan.platform}] component {comp.name}"
        materializer = Materializer(self.ctx(plan.epoch), plan.image,
                                    {k: r.sha256 for k, r in self.outputs.items()})
        seeds = self.compiler_caches.seeds(comp) if comp.caches else []
        result = run_build(self.builder(site), tag=tag, platform=plan.platform,
                           context=lambda out: materializer.write_context(out, comp.dockerfile, comp.context, seeds),
                           secrets=self.secrets(comp.secrets, f"component {comp.name}"), label=label, image=plan.image,
                           log_path=self.home / "logs" / f"{plan.image.replace(':', '--')}-{comp.name}-{comp.key[:12]}.log",
                           expected_s=self.history.seconds(f"component {comp.name}"), verbose=self.verbose,
                           engine_alive=site.engine.ping)
        enginetags.made(self.store, tag)  # this store's to collect (`gc`)
        try:
            if self.scanner.declared:
                self.scanner.check_image(site.engine, tag, site.assembler.layers(comp.builder),
                                         self.scanner.values(), f"component {comp.name}")
            exported = export_outputs(site.engine, tag, comp.name, comp.outputs, self.store, plan.epoch)
        except BaseException:
            with contextlib.suppress(EngineUnavailable):
                site.engine.remove(tag, force=True)
            raise
        if comp.caches:
            self.compiler_caches.keep(site.engine, tag, comp)
        record = dataclasses.replace(exported, name=comp.name, seconds=result.seconds)
        self.store.put_record("outputs", comp.key, record.to_json())
        self.remade.add(comp.key)
        self.history.remember_seconds(f"component {comp.name}", result.seconds)
        self.outcome.built.append(f"component {comp.name}")
        self.outcome.seconds[f"component {comp.name}"] = result.seconds
        output().done(f"  {label}: built in {result.seconds:.1f}s{self.on(site)}, outputs {human_bytes(exported.size)} "
                      f"({exported.files} entries)")
        return record

    def builder_envs(self, to_build: list[ComponentNode], plan: ImagePlan) -> None:
        """The builder environments of the components to build, first: components share them."""
        for comp in to_build:
            if comp.release is not None:
                continue
            site = self.assigned[comp.name]
            try:
                self.make_chain(comp.builder, plan, site)
            except (BuilderLost, EngineUnavailable):
                others = [s for s in capable(self.sites or [], plan.platform) if s is not site]
                if not others or site.alive():  # no builder to go to: the engine's own error, at once
                    raise
                output().say(f"  builder {site.name} stopped answering while making a builder environment; "
                             "what was assigned to it goes to the others")

    def components(self, plan: ImagePlan, only: frozenset[str] | None = None) -> None:
        """Every component of the plan (or those named in `only`, and what they need)."""
        wanted = needed_by(plan, only, self.available) if only else {c.name for c in plan.components}
        pending = {c.name: c for c in plan.components if c.name in wanted}
        if not pending:
            return
        to_build = [c for c in plan.components if c.name in wanted and not self.available(c)]
        if to_build:
            self.assign(to_build, plan)
        self.builder_envs(to_build, plan)
        done: set[str] = set()
        running: dict[Future[None], str] = {}
        pool = ThreadPoolExecutor(max_workers=self.jobs * len(self.sites or [self.local]))
        try:
            while pending or running:
                for name, comp in list(pending.items()):
                    if all(n in done or n not in wanted for n in comp.needs):
                        running[pool.submit(self.component, comp, plan)] = name
                        del pending[name]
                if not running:
                    break
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in finished:
                    name = running.pop(future)
                    future.result()  # a failure stops the build here
                    done.add(name)
        except BaseException:
            # a failure, Ctrl-C or SIGTERM: the other builds are cancelled, not waited for
            pool.shutdown(wait=False, cancel_futures=True)
            proc.stop_all()
            pool.shutdown(wait=True)
            raise
        pool.shutdown(wait=True)

    def assign(self, to_build: list[ComponentNode], plan: ImagePlan) -> None:
        """Which builder makes each component (with none named: this machine's engine)."""
        if self.sites is None:
            self.sites = connect(self.builder_specs or [self.local.spec], self.store, local=self.local,
                                 fresh=self.fresh or self.rebuild)
        work = [(c.name, self.history.seconds(f"component {c.name}") or 1.0) for c in to_build]
        self.assigned = assign(work, plan.platform, self.sites)
        if len(self.sites) > 1:
            for comp in to_build:
                output().say(f"  component {comp.name}: on builder {self.assigned[comp.name].name}")

    # -- the image --------------------------------------------------------------------------
    def build(self, plan: ImagePlan, platforms: tuple[str, ...], load: bool = True) -> Outcome:
        """Make what the plan lacks, then load the image into the engine (unless `load` is
        False: its layers stay in the store, its ID is its config's digest)."""
        # the spec's own labels and env: refused before anything is built
        self.scanner.check_config(self.assembler.config_for(plan.runtime, plan.config, SCRATCH).document([]),
                                  f"image {plan.image} ({plan.platform})")
        if load or not self.substitute(plan):  # (with some layers stood in, the rest are made here)
            if self.stood_in:  # the components whose outputs a layer left to make installs
                wanted = {node.payload.made_by() for node in plan.runtime.layers if not self.made(node)}
                names = frozenset(c.name for c in plan.components if c.key in wanted)
                if names:
                    self.components(plan, names)
            else:
                self.components(plan)
            for pin in git_wheels(plan.runtime):
                self.fetcher.git_wheel(self.home, pin, self.mirrors)
            self.make_chain(plan.runtime, plan, preload=load)
        config = final_config(self.assembler, plan)
        # every layer and the config, before anything is tagged
        self.scanner.check_config(config.document(self.assembler.layers(plan.runtime)),
                                  f"image {plan.image} ({plan.platform})")
        self.scanner.check_layers([(la.blob, la.created_by) for la in self.assembler.layers(plan.runtime)
                                   if la.blob and self.store.has(la.blob)], f"image {plan.image} ({plan.platform})")
        tags = local_tags(plan, platforms)
        if load:
            self.outcome.image_id = self.assembler.load(plan.runtime, config, tags, self.known)
            before = self.assembler.before
            self.outcome.replaced = before if before and before != self.outcome.image_id else None
            self.outcome.config, self.outcome.layers = self.assembler.rendered
        else:
            layers = self.assembler.layers(plan.runtime)
            data = config.render(layers)
            self.outcome.image_id = image_id_of(data)
            self.outcome.config, self.outcome.layers = data, layers
        self.history.record(plan.tag, plan)
        if self.outcome.built or self.outcome.written:
            self.fill_cache()
        return self.outcome

    def substitute(self, plan: ImagePlan) -> bool:
        """A build that loads nothing takes the registry cache's description of the runtime layers
        it has not made (substitutes.py) instead of making them. When every such layer is
        described nothing is built or downloaded (True); otherwise only the others are made (False,
        the stood-in ones counted as made), and where one of them reads the chain below it (for
        bytecode, only the prefix that holds the interpreter) the stood-in layers it reads are
        fetched from the cache. A declared secret whose value is here is searched for in the
        stood-in layers' bytes, fetched for that."""
        if self.cache is None or self.rebuild:
            return False
        layers = plan.runtime.layers
        lacking = [node for node in layers if not self.made(node)]
        described = [node for node in lacking if self.cache.has(f"{record_key(node)}-sub")]
        if not described:
            return False
        rest = [node for node in lacking if node not in described]
        # a layer left to make that reads the chain below it (bytecode: only the prefix that holds
        # the interpreter) needs the bytes of the stood-in layers there, taken from the cache
        read = [read_prefix(plan.runtime, layers.index(node)) for node in rest if not stands_alone(node)]
        below = [n for n in described if any(n in prefix.layers for prefix in read)]
        if not all(substitutes.take_outputs(self.cache, self.store, comp) for comp in plan.components):
            return False  # the SBOM names every component's outputs: without their records, build
        if not all(substitutes.take(self.cache, self.store, node) for node in described):
            return False
        self.stood_in = {record_key(node) for node in described}
        self.outcome.substituted = [node.name for node in described]
        if self.scanner.declared and self.scanner.values():
            substitutes.realize_all(self.store, described)
        else:
            substitutes.realize_all(self.store, below)
        output().say(f"  [{plan.platform}] {len(described)} layer(s) stood in by {self.cache.name} "
                     "(made and pushed elsewhere)" + (f"; {len(rest)} to make here" if rest else
                                                       ": nothing built or downloaded"))
        if rest:
            return False
        self.outcome.reused += len(plan.runtime.layers) - len(lacking)
        return True

    def fill_cache(self) -> None:
        """What this machine made before the cache was configured goes to the cache too (a run
        that builds nothing stays off the network)."""
        if self.cache is None:
            return
        for item in self.reused:
            if isinstance(item, ComponentNode):
                if self.cache.lacks(item.key):
                    self.cache.push_output(item, self.store)
            elif self.cache.lacks(record_key(item)):
                self.cache.push_layer(item, self.store)


def needed_by(plan: ImagePlan, names: frozenset[str],
              available: Callable[[ComponentNode], bool] | None = None) -> set[str]:
    """The named components and, transitively, what they need; with `available`, what a component
    that is available (made here, or in the registry cache) needs is not needed for it."""
    by_name = {c.name: c for c in plan.components}
    unknown = sorted(set(names) - set(by_name))
    if unknown:
        raise UserError(f"--component {', '.join(unknown)}: {plan.image} builds no such component for "
                        f"{plan.platform}", hint=f"its components: {', '.join(sorted(by_name)) or 'none'}")
    out: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in out:
            out.add(name)
            if available is None or not available(by_name[name]):
                todo += by_name[name].needs
    return out


def final_config(assembler: Assembler, plan: ImagePlan) -> ImageConfig:
    """The runtime image's config: the base's, then the spec's settings; `created` from the lock."""
    config = assembler.config_for(plan.runtime, plan.config)
    config.created = plan.created
    return config


def output_record(store: Store, key: str) -> OutputRecord | None:
    record = store.record("outputs", key)
    return OutputRecord.from_json(record) if record else None

