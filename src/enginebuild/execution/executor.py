"""Walking a plan: build what is missing, reuse what is recorded, assemble the image.

Components first (independent ones at the same time), each on its builder environment;
then the runtime's layers in order; then the image, loaded into the engine with the config
enginebuild writes. Nothing is recorded for a node that failed; what was made is kept.
"""

from __future__ import annotations

from enginebuild.execution.assemble import SCRATCH, Assembler
from enginebuild.execution.chains import read_prefix, stands_alone
from enginebuild.execution.componentwork import ComponentWork
from enginebuild.execution.fetch import git_wheels
from enginebuild.execution.runstate import Outcome, local_tags
from enginebuild.io.progress import output
from enginebuild.oci.image import ImageConfig, image_id_of
from enginebuild.plan.model import ComponentNode, ImagePlan
from enginebuild.plan.stored import record_key
from enginebuild.registrycache import substitutes


class Executor(ComponentWork):
    """Walks a plan: components, then the runtime's chain, then the image (see the module's doc)."""

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
            if self.outcome.replaced:  # the same layers as the image it replaces, or others (in another order)?
                self.outcome.same_layers = self.assembler.before_layers == [la.diff_id for la in self.outcome.layers]
        else:
            layers = self.assembler.layers(plan.runtime)
            data = config.render(layers)
            self.outcome.image_id = image_id_of(data)
            self.outcome.config, self.outcome.layers = data, layers
        # the nodes the image now consists of (state/history.py says what changed since)
        nodes = [(f"component {comp.name}", comp.key, comp.inputs) for comp in plan.components]
        self.history.record_nodes(plan.tag, nodes + [(n.name, n.chain, n.inputs) for n in plan.runtime.layers])
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


def final_config(assembler: Assembler, plan: ImagePlan) -> ImageConfig:
    """The runtime image's config: the base's, then the spec's settings; `created` from the lock."""
    config = assembler.config_for(plan.runtime, plan.config)
    config.created = plan.created
    return config
