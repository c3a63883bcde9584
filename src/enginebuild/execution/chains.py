"""Making an environment's layers in order: written on the host, run by BuildKit, taken from the
store or the registry cache, loaded into the engine as a chain."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future

from enginebuild.errors import BuildFailed
from enginebuild.execution.buildkit import run_build
from enginebuild.execution.fetch import STOP_WAIT_S, Prefetch, layer_downloads
from enginebuild.execution.layers import LayerMaker, cut_new_layers, normalize_into_store, remove_folder, scratch_folder
from enginebuild.execution.materialize import Materializer
from enginebuild.execution.preload import Preloader
from enginebuild.execution.runstate import RAW_REPO, RunState
from enginebuild.execution.sites import Site
from enginebuild.io.background import Background, settled
from enginebuild.io.progress import Work, human_bytes, output
from enginebuild.plan.envs import CHAIN_REPO
from enginebuild.plan.model import EnvNode, ImagePlan, LayerNode
from enginebuild.plan.stored import put_layer_blobs, record_key
from enginebuild.registrycache import substitutes


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

    def running(self, name: str, make: Callable[..., None], *args: object) -> None:
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


class ChainWork(RunState):
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
