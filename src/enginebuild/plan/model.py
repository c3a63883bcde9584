"""What a plan is made of: layers, environments, components and the image of one platform.

Every node has a `key` (the digest of exactly the inputs that shape its bytes) and every
layer a `chain` (its key folded onto its parent's chain): a layer written by enginebuild
depends only on its own inputs; a layer a command writes depends on everything below it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import cast

from enginebuild.core.imagesettings import SETTINGS
from enginebuild.layerkinds.base import LayerPayload
from enginebuild.layerkinds.context import ContextItem
from enginebuild.lock.pins import ImagePin, PyPin
from enginebuild.plan.routes import Route
from enginebuild.recipe.model import Outputs, PatchRef
from enginebuild.wire import JsonDoc


@dataclass(frozen=True)
class LayerNode:
    kind: str  # system | run | wheel | output | overlay | files | manifest | step
    name: str
    key: str
    chain: str
    payload: LayerPayload = field(compare=False)  # its kind: layerkinds/
    inputs: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    where: str = field(default="", compare=False)  # the spec's line that asks for it (a step), for messages

    @property
    def by_command(self) -> bool:
        return self.payload.by_command

    @property
    def stored_as(self) -> str:
        """The key its blobs are recorded under: a layer a command wrote depends on everything below
        it (its chain), one enginebuild writes only on its inputs (its key)."""
        return self.chain if self.by_command else self.key


@dataclass(frozen=True)
class EnvNode:
    """A base and the layers on it; `tip` is the chain key of the whole."""

    role: str
    platform: str
    base: ImagePin | None  # None: scratch
    layers: tuple[LayerNode, ...]
    root: str  # the chain key of the base alone
    env: tuple[tuple[str, str], ...] = ()  # variables commands on this chain see (beyond the base's)

    @property
    def tip(self) -> str:
        return self.layers[-1].chain if self.layers else self.root

    def prefix(self, chain: str) -> EnvNode:
        """This environment up to the layer whose chain is `chain`."""
        for i, layer in enumerate(self.layers):
            if layer.chain == chain:
                return EnvNode(self.role, self.platform, self.base, self.layers[: i + 1], self.root, self.env)
        if chain == self.root:
            return EnvNode(self.role, self.platform, self.base, (), self.root, self.env)
        raise KeyError(chain)


@dataclass(frozen=True)
class ComponentNode:
    name: str
    key: str
    platform: str
    builder: EnvNode
    dockerfile: str
    context: tuple[ContextItem, ...]
    secrets: tuple[str, ...]
    needs: tuple[str, ...]
    outputs: Outputs
    cuda_archs: tuple[str, ...] = ()
    inputs: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    outside: tuple[str, ...] = ()  # patches of its stack touching none of its declared inputs
    caches: tuple[str, ...] = ()  # build.cache folders (ccache): kept, and carried by the registry cache
    cache_key: str = ""  # where those are kept: component, platform and builder environment (not the key)
    release: PyPin | None = None  # the release wheel it is taken from (nothing is built)
    file_patches: tuple[PatchRef, ...] = ()  # its patches applied as files, not in its build (plan/routes.py)
    stack: tuple[PatchRef, ...] = ()  # its whole patch stack, in order (where some are applied as files)
    routes: tuple[Route, ...] = ()  # each patch's route, and why
    tree: ContextItem | None = None  # the source tree its build receives, where patches are applied as files


@dataclass(frozen=True)
class ImageSettings:
    """The image's own settings as its spec gives them, one per setting of the image config
    (core/imagesettings.py `SETTINGS`), named by its field; laid over its base's when the config is made
    (Dockerfile semantics: a new entrypoint resets the base's cmd)."""

    values: dict[str, object]  # field -> the spec's value (env and labels as the plan completed them)
    env_note: str = ""  # what a reader of the rendered Dockerfile should know about the variables
    labels_removed: tuple[str, ...] = ()  # the base's labels the image drops (`labels: {KEY: null}`)

    @classmethod
    def of(cls, spec: object, env: tuple[tuple[str, str], ...], labels: dict[str, str], env_note: str = "",
           labels_removed: tuple[str, ...] = ()) -> ImageSettings:
        """Every setting's value from the spec's field of its name; env and labels as the plan made them."""
        values = {s.field: getattr(spec, s.field) for s in SETTINGS}
        return cls({**values, "env": env, "labels": labels}, env_note, labels_removed)

    @property
    def env(self) -> tuple[tuple[str, str], ...]:
        return cast("tuple[tuple[str, str], ...]", self.values["env"])

    @property
    def labels(self) -> dict[str, str]:
        return cast("dict[str, str]", self.values["labels"])

    def fields(self) -> JsonDoc:
        """Its values as plain data (what the content tag hashes: publish/changed.py)."""
        plain = {k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v
                 for k, v in self.values.items()}
        return {**plain, "labels_removed": self.labels_removed}


@dataclass(frozen=True)
class ImagePlan:
    image: str
    platform: str
    created: str
    epoch: int
    components: tuple[ComponentNode, ...]
    runtime: EnvNode
    config: ImageSettings  # the image's own settings, without the base's
    manifest: JsonDoc  # the manifest document the image carries
    tags: tuple[str, ...]  # local tags: platform-qualified first
    cuda_archs: tuple[str, ...] = ()
    stand_in: str | None = None
    unused: tuple[str, ...] = ()  # components nothing installs or needs: not built

    @property
    def tag(self) -> str:
        return self.tags[0]

    def component(self, name: str) -> ComponentNode:
        return next(c for c in self.components if c.name == name)

    def nodes(self) -> list[tuple[str, str, str]]:
        """(kind, name, key) of every node, for history and "what changed"."""
        out = [("component", c.name, c.key) for c in self.components]
        out += [("layer", layer.name, layer.chain) for layer in self.runtime.layers]
        return out
