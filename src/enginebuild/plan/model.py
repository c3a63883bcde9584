"""What a plan is made of: layers, environments, components and the image of one platform.

Every node has a `key` (the digest of exactly the inputs that shape its bytes) and every
layer a `chain` (its key folded onto its parent's chain): a layer written by enginebuild
depends only on its own inputs; a layer a command writes depends on everything below it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from enginebuild.lock.pins import DebPin, ImagePin, PyPin
from enginebuild.sources import Source
from enginebuild.spec.model import FileEntry, Healthcheck, Outputs, PatchRef
from enginebuild.wire import JsonDoc

# -- where the bytes of a build-context item come from ------------------------------------


@dataclass(frozen=True)
class FromData:
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class FromFile:
    path: Path


@dataclass(frozen=True)
class FromBlob:
    """A fetched artifact in the store, by sha256 (a .deb, a wheel)."""

    sha256: str
    what: str
    urls: tuple[str, ...] = ()
    size: int | None = None


@dataclass(frozen=True)
class FromSource:
    """A source's whole tree, with its patch stack applied on the host."""

    source: Source
    pin: Any
    patches: tuple[PatchRef, ...]
    only: tuple[str, ...] = ()  # declared inputs (globs): the tree holds only those


@dataclass(frozen=True)
class FromOutput:
    """What a component built (its exported outputs)."""

    component: str
    key: str


Origin = FromData | FromFile | FromBlob | FromSource | FromOutput


@dataclass(frozen=True)
class ContextItem:
    """One file of a BuildKit build context; `digest` is its identity in keys."""

    arcname: str
    digest: str
    origin: Origin = field(compare=False)
    mode: int = 0o644
    label: str = field(default="", compare=False)  # what a user calls it, for "what changed"


# -- layers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Download:
    """A file the plan needs in the store, by sha256, and where to get it."""

    sha256: str
    urls: tuple[str, ...]
    what: str
    size: int | None = None
    index: str = ""
    project: str = ""
    filename: str = ""


@dataclass(frozen=True)
class TailFile:
    """A file of the image's tail (manifest, `files:`), for `render --out`: its bytes, or its
    path beside the spec, or its sha256 in the store."""

    dest: str
    mode: int
    data: bytes | None = None
    path: Path | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class LayerPayload:
    """What a layer holds. Each kind below says how it behaves, so that nothing else asks which
    kind a layer is: whether BuildKit writes it (`by_command`), whether it is written from its
    own inputs alone, what it needs downloaded, how `render` shows it, which component made its
    files, and what it puts in the tail `render --out` writes."""

    by_command: ClassVar[bool] = False  # commands BuildKit runs on the chain below
    reads_chain: ClassVar[bool] = False  # written on the host from files of the chain below (loaded for it)
    starts_tail: ClassVar[bool] = False  # the first layer of the image's tail (the manifest)

    def stands_alone(self) -> bool:
        """Written by enginebuild from its own inputs only (not from the chain below it)."""
        return True

    def downloads(self) -> list[Download]:
        return []

    def describe(self, name: str, folder: str) -> str:
        """Its line of the Dockerfile `render` shows; `folder`: its place in the tail's context."""
        return f"# layer {name}"

    def made_by(self) -> str:
        """The key of the component of this image whose build made its files ("" for none)."""
        return ""

    def tail_files(self) -> list[TailFile]:
        return []

    def git_pins(self) -> tuple[PyPin, ...]:
        """Python distributions it installs that are built from a git source first."""
        return ()


@dataclass(frozen=True)
class Sysroot(LayerPayload):
    """System packages unpacked by enginebuild (for `install: extract`)."""

    debs: tuple[DebPin, ...]
    urls: tuple[str, ...]

    def downloads(self) -> list[Download]:
        return [Download(d.sha256, (url,), f"{d.name} {d.version} (.deb)", d.size)
                for d, url in zip(self.debs, self.urls, strict=False)]

    def describe(self, name: str, folder: str) -> str:
        return f"ADD system.tar /   # enginebuild: {len(self.debs)} pinned .debs unpacked"


@dataclass(frozen=True)
class Run(LayerPayload):
    """Commands BuildKit runs on the parent chain; the layers they write are normalised."""

    dockerfile: str
    context: tuple[ContextItem, ...]
    secrets: tuple[str, ...] = ()
    by_command: ClassVar[bool] = True

    def stands_alone(self) -> bool:
        return False

    def downloads(self) -> list[Download]:
        return [Download(c.origin.sha256, c.origin.urls, c.origin.what, c.origin.size) for c in self.context
                if isinstance(c.origin, FromBlob)]

    def describe(self, name: str, folder: str) -> str:
        body = [line for line in self.dockerfile.splitlines() if line.startswith("RUN")]
        return "\n".join(body) + "   # BuildKit, then normalised"


@dataclass(frozen=True)
class Wheel(LayerPayload):
    """The wheels a component of this image builds, installed by enginebuild's wheel installer."""

    pin: PyPin
    site_packages: str
    interpreter: str
    component_key: str = ""  # for a wheel a component of this image builds
    closure: tuple[tuple[str, str], ...] | None = None  # what the lock holds, which the wheel's needs must match
    target: tuple[tuple[str, str], ...] = ()  # the marker environment its needs are read for
    editable: str = ""  # the tree an editable wheel points at (recorded in direct_url.json, as pip does)

    def describe(self, name: str, folder: str) -> str:
        return f"# enginebuild: python {self.pin.name} (built by component {self.pin.component}) installed into " \
               f"{self.site_packages}"

    def made_by(self) -> str:
        return self.component_key


@dataclass(frozen=True)
class Wheels(LayerPayload):
    """Python distributions of the lock installed by enginebuild's wheel installer into one layer
    (plan/wheelgroups.py says which share it)."""

    pins: tuple[PyPin, ...]
    site_packages: str
    interpreter: str
    base: str = ""  # the base whose distributions some of these replace
    removes: tuple[tuple[str, str], ...] = ()  # (name, its .dist-info folder in the base): files to delete

    def stands_alone(self) -> bool:
        return not self.removes  # deleting the base's files reads the chain below

    def git_pins(self) -> tuple[PyPin, ...]:
        return tuple(pin for pin in self.pins if pin.origin == "git")

    def downloads(self) -> list[Download]:
        return [Download(p.sha256, (p.url,), p.filename, p.size, p.index, p.name, p.filename)
                for p in self.pins if p.sha256]

    def describe(self, name: str, folder: str) -> str:
        return f"# enginebuild: {name} installed into {self.site_packages}"


@dataclass(frozen=True)
class OutputTree(LayerPayload):
    """A component's outputs (a prefix or paths), copied into the runtime."""

    component: str
    component_key: str
    outputs: Outputs
    site_packages: str = ""  # where a wheels output is installed
    interpreter: str = "/usr/bin/python3"

    def describe(self, name: str, folder: str) -> str:
        paths = " ".join(self.outputs.paths)
        to = self.outputs.to if self.outputs.kind == "prefix" else "/"
        return f"COPY --from=component:{self.component} {paths} {to}   # enginebuild: outputs only"

    def made_by(self) -> str:
        return self.component_key


@dataclass(frozen=True)
class OverlayFiles(LayerPayload):
    """Files of the engine the base ships, patched on the host."""

    name: str
    installed: str
    patches: tuple[PatchRef, ...]
    source: Source
    pin: Any
    reads_chain: ClassVar[bool] = True

    def stands_alone(self) -> bool:
        return False  # the files are the base's, read from the chain below

    def describe(self, name: str, folder: str) -> str:
        return (f"# enginebuild: {len(self.patches)} patch(es) of {self.name} applied on the host to the "
                f"files the base has in {self.installed}")


@dataclass(frozen=True)
class Files(LayerPayload):
    entries: tuple[FileEntry, ...]

    def downloads(self) -> list[Download]:
        return [Download(e.sha256, (e.url,), e.display) for e in self.entries if e.url and e.sha256]

    def describe(self, name: str, folder: str) -> str:
        return f"COPY {folder}/ /   # enginebuild: " + ", ".join(e.dest for e in self.entries[:4]) + (
            " ..." if len(self.entries) > 4 else "")

    def tail_files(self) -> list[TailFile]:
        return [TailFile(e.dest, e.mode, path=e.src, sha256=e.sha256) for e in self.entries]


@dataclass(frozen=True)
class Data(LayerPayload):
    """One generated file (the manifest)."""

    dest: str
    data: bytes = field(repr=False)
    starts_tail: ClassVar[bool] = True

    def describe(self, name: str, folder: str) -> str:
        return f"COPY {folder}/ /   # enginebuild: {self.dest}"

    def tail_files(self) -> list[TailFile]:
        return [TailFile(self.dest, 0o644, data=self.data)]


Payload = Sysroot | Run | Wheel | Wheels | OutputTree | OverlayFiles | Files | Data


@dataclass(frozen=True)
class LayerNode:
    kind: str  # system | run | wheel | output | overlay | files | manifest | step
    name: str
    key: str
    chain: str
    payload: Payload = field(compare=False)
    inputs: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def by_command(self) -> bool:
        return self.payload.by_command


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


@dataclass(frozen=True)
class ImageSettings:
    """The image's own settings, laid over its base's (Dockerfile semantics: a new entrypoint
    resets the base's cmd)."""

    env: tuple[tuple[str, str], ...]
    entrypoint: tuple[str, ...] | None
    cmd: tuple[str, ...] | None
    workdir: str | None
    user: str | None
    labels: dict[str, str]
    expose: tuple[int, ...]
    stopsignal: str | None
    shell: tuple[str, ...] | None
    healthcheck: Healthcheck | None
    env_note: str = ""  # what a reader of the rendered Dockerfile should know about the variables


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
