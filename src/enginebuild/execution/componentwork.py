"""Building an image's components: on their builder sites, independent ones at the same time, each
reused from the store or the registry cache when its outputs are there, rebuilt elsewhere when its
builder is lost."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from enginebuild.errors import BuilderLost, UserError
from enginebuild.execution import enginetags
from enginebuild.execution.buildkit import run_build
from enginebuild.execution.chains import ChainWork
from enginebuild.execution.fetch import component_downloads
from enginebuild.execution.materialize import Materializer
from enginebuild.execution.outputs import OutputRecord, export_outputs, release_outputs
from enginebuild.execution.runstate import COMPONENT_REPO
from enginebuild.execution.sites import Site, assign, capable, connect
from enginebuild.io import proc
from enginebuild.io.progress import human_bytes, output
from enginebuild.io.store import Store
from enginebuild.oci.engine import EngineUnavailable
from enginebuild.plan.envs import CHAIN_REPO, parent_ref
from enginebuild.plan.model import ComponentNode, ImagePlan


class ComponentWork(ChainWork):
    def output_record(self, comp: ComponentNode) -> OutputRecord | None:
        """The outputs of `comp` kept in the store, when they are whole (and not to be made again):
        re-hashed only when their file's stat moved since it was last found whole, as a layer's are
        (hashing a vLLM package's 248 MB twice a build was a second of every patch edit)."""
        if self.rebuild and comp.key not in self.remade:
            return None
        record = output_record(self.store, comp.key)
        if record and self.store.intact(record.sha256, f"outputs of {comp.name}") and all(
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


def output_record(store: Store, key: str) -> OutputRecord | None:
    record = store.record("outputs", key)
    return OutputRecord.from_json(record) if record else None
