"""Image specs as frozen dataclasses (built from a validated, merged tree by recipe/reader.py)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from enginebuild.core.keys import keyed_as, unkeyed
from enginebuild.errors import Where
from enginebuild.sources import Source

if TYPE_CHECKING:
    from enginebuild.core.patchfile import PatchFile
    from enginebuild.recipe.patchchecks import PatchCheck

DEFAULT_PLATFORM = "linux/arm64"
DEFAULT_ARCHIVE_URL = "http://deb.debian.org/debian"
DEFAULT_SUITE = "bookworm"

# a ${NAME}, ${NAME:-default}, $NAME or $$ in an env value or a command
ENV_REF = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
                     r"|(?P<dollar>\$))")


@dataclass(frozen=True)
class FileEntry:
    """One file of the image: from a file beside the spec, or a URL pinned by sha256."""

    # in a layer's key: where it lands and its mode; its bytes are keyed by their digest (Files.digests)
    dest: str
    mode: int
    display: str = field(metadata=unkeyed("what the user calls it, for messages: the bytes are keyed by digest"))
    src: Path | None = field(default=None, metadata=unkeyed("a host path: the bytes are keyed by digest"))
    url: str | None = field(default=None, metadata=unkeyed("where the bytes are downloaded from: keyed by digest"))
    sha256: str | None = field(default=None, metadata=unkeyed("the pinned digest of a URL's bytes: the layer keys "
                                                              "every entry's digest"))
    # mode: written in the spec (else from the file's executable bit)
    mode_given: bool = field(default=False, metadata=unkeyed("how the mode was chosen: the mode is keyed"))


@dataclass(frozen=True)
class FileGroup:
    """One `files:` entry: a file, a folder or a glob. Each group is its own layer."""

    key: str  # the destination as written
    entries: tuple[FileEntry, ...]
    where: Where
    # a glob or folder: ("glob", folder, pattern) or ("folder", folder, ""), to list it again
    listing: tuple[str, str, str] | None = None


@dataclass(frozen=True)
class PatchRef:
    name: str  # relative to patches/
    path: Path = field(metadata=unkeyed("a host path: the patch is keyed by its bytes' sha256"))
    where: Where = field(metadata=unkeyed("where the spec names it, for messages"))
    patch: PatchFile = field(compare=False, repr=False,
                             metadata=keyed_as(lambda p: p.sha256, "the parsed patch is its bytes: their sha256"))
    # <name>.checks.yaml
    checks: tuple[PatchCheck, ...] = field(default=(), compare=False, repr=False, metadata=unkeyed(
        "what is run in the built image to check the patch's behaviour: it shapes no bytes"))

    @property
    def checks_file(self) -> Path:
        """Where its checks are (or would be): a change there is run again, not built again."""
        from enginebuild.recipe.patchchecks import checks_path

        return checks_path(self.path)


@dataclass(frozen=True)
class Keyring:
    file: Path | None
    url: str | None
    sha256: str | None
    display: str


@dataclass(frozen=True)
class Archive:
    url: str
    suite: str
    components: tuple[str, ...]
    flat: bool
    keyring: Keyring | None
    fingerprint: str | None

    @property
    def label(self) -> str:
        return f"{self.url} {self.suite}" + ("" if self.flat else " " + ",".join(self.components))


@dataclass(frozen=True)
class System:
    packages: tuple[str, ...]
    archives: tuple[Archive, ...]
    install: str  # dpkg | extract
    upgrade: bool
    run: tuple[str | tuple[str, ...], ...]


@dataclass(frozen=True)
class PyRequirement:
    text: str
    where: Where
    index: str | None = None  # a name of python.indexes
    git_url: str | None = None
    git_ref: str | None = None
    url: str | None = None
    sha256: str | None = None
    component: str | None = None
    deps: bool = True
    requires_from: tuple[str, ...] = ()  # files of the component's source stating what its wheel needs
    excludes: tuple[str, ...] = ()  # names left out of what those files state (canonical)

    @property
    def name(self) -> str:
        return canonicalize_name(Requirement(self.text).name)


@dataclass(frozen=True)
class Python:
    version: str
    requirements: tuple[PyRequirement, ...]
    indexes: tuple[tuple[str, str], ...]  # (name, url), in spec order
    site_packages: str
    interpreter: str
    constraints: tuple[str, ...]
    overrides: tuple[str, ...] = ()  # replace every requirement on that name, as uv's --override


@dataclass(frozen=True)
class Environment:
    """A base image and what is installed on it."""

    base: str
    system: System | None = None
    python: Python | None = None


@dataclass(frozen=True)
class Build:
    script: FileEntry | None  # None only for a component taken from a release
    args: tuple[tuple[str, str], ...] = ()
    cache: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()


class OutputsKind(StrEnum):
    """What a component's build leaves (`outputs:` of its spec, one key each). A StrEnum: equal to
    its value, so the writer modules that compare a kind with its value (layerkinds/outputs.py,
    layerkinds/patchedfiles.py, execution/outputs.py) read it unchanged and keep their keys."""

    WHEELS = "wheels"  # a folder of wheels, installed into the runtime's Python
    PREFIX = "prefix"  # a folder copied under `to` in the runtime
    PATHS = "paths"  # listed paths, each where it is in the build
    EDITABLE = "editable"  # a source tree kept where the image keeps it, installed editable

    @property
    def installs_wheels(self) -> bool:
        """Whether the runtime's Python installs what it leaves (wheels, an editable tree's wheel)."""
        return self in (OutputsKind.WHEELS, OutputsKind.EDITABLE)

    @property
    def at_own_paths(self) -> bool:
        """Whether each path lands where it is in the build (paths, and an editable tree)."""
        return self in (OutputsKind.PATHS, OutputsKind.EDITABLE)

    @property
    def routable(self) -> bool:
        """Whether a patch can be applied to what it leaves as files (plan/routes.py): not to an
        editable tree, which is the source itself."""
        return self is not OutputsKind.EDITABLE


@dataclass(frozen=True)
class Outputs:
    kind: OutputsKind
    paths: tuple[str, ...]  # the folder (wheels, prefix), the listed paths, or the kept tree (editable)
    to: str = "/"  # where a prefix lands in the runtime

    @property
    def at_own_paths(self) -> bool:
        """Whether each path lands where it is in the build (paths, and an editable tree)."""
        return self.kind.at_own_paths


@dataclass(frozen=True)
class Step:
    name: str
    run: str | tuple[str, ...]
    secrets: tuple[str, ...] = ()
    cache: tuple[str, ...] = ()
    files: tuple[FileEntry, ...] = ()  # beside the spec, mounted read-only at STEP_FILES/<name>


@dataclass(frozen=True)
class ExtraSource:
    name: str
    source: Source
    env: str | None


@dataclass(frozen=True)
class Release:
    """`release: {name, version, index}`: a component's output taken from a released wheel (the
    file of that release for the target platform and Python), built nowhere."""

    name: str
    version: str
    index: str


@dataclass(frozen=True)
class Component:
    name: str
    source: Source | None
    sources: tuple[ExtraSource, ...]
    patches: tuple[PatchRef, ...]
    builder: Environment
    build: Build
    needs: tuple[str, ...]
    outputs: Outputs
    steps: tuple[Step, ...]
    cuda_archs: tuple[str, ...]
    where: Where
    inputs: tuple[str, ...] = ()  # globs of the source the build reads (empty: all of it)
    release: Release | None = None  # its wheel from a release: nothing of the above is built
    patches_as_files: bool = True  # a patch its build would install verbatim is applied as files (plan/routes.py)


@dataclass(frozen=True)
class Overlay:
    name: str
    source: Source
    installed: str
    patches: tuple[PatchRef, ...]
    where: Where


@dataclass(frozen=True)
class Healthcheck:
    test: tuple[str, ...]  # Docker's form: CMD + argv, CMD-SHELL + a shell command, or NONE
    interval: str | None
    timeout: str | None
    start_period: str | None
    retries: int | None


@dataclass(frozen=True)
class Model:
    name: str = ""
    quantization: str = ""
    format: str = ""
    drafter: str = ""


@dataclass(frozen=True)
class CudaSkip:
    path: str  # a glob of paths in the image
    why: str


@dataclass(frozen=True)
class CudaVerify:
    """How `verify` judges kernel architectures: accept JIT-able PTX, skip named binaries."""

    jit: bool = False
    skip: tuple[CudaSkip, ...] = ()
    driver: int | None = None  # the driver branch the image targets (580: CUDA 13.0)


@dataclass(frozen=True)
class ImportCheck:
    """Import the top-level modules of the distributions enginebuild installs, in a container."""

    env: tuple[tuple[str, str], ...] = ()
    skip: tuple[tuple[str, str], ...] = ()  # (module, why)


@dataclass(frozen=True)
class RuntimeCheck:
    """How the runtime-closure check judges the image's binaries: skip named ones, with the reason;
    `imports`: also import its Python packages (opt-in)."""

    skip: tuple[CudaSkip, ...] = ()
    imports: ImportCheck | None = None


@dataclass(frozen=True)
class ScanAllow:
    path: str
    rule: str
    why: str


T = TypeVar("T")


@dataclass(frozen=True)
class SpecKey:
    """A key of image.yaml read straight into the model field that declares it (`spec_key`), so
    that field is its only declaration: `schema` names the node that checks it (recipe/fields.py
    NODES, which also writes its JSON Schema), `read` how its value becomes the field's (`value`;
    `bool`; `tuple` of a list; `pairs`, a mapping's (key, value) pairs without its nulls), `doc`
    its description in the JSON Schema."""

    key: str
    schema: str
    read: str = "value"
    doc: str = ""


def spec_key(key: str, schema: str, default: T, read: str = "value", doc: str = "") -> T:
    """A field read from the spec's key `key` (see SpecKey); `default` when the spec does not give it."""
    return field(default=default, metadata={"spec": SpecKey(key, schema, read, doc)})


def spec_keys(model: type) -> tuple[tuple[dataclasses.Field[object], SpecKey], ...]:
    """The fields of `model` declared with `spec_key`, in order, each with its key."""
    return tuple((f, f.metadata["spec"]) for f in dataclasses.fields(model) if "spec" in f.metadata)


@dataclass(frozen=True)
class ImageSpec:
    name: str  # IMAGE or IMAGE:VARIANT
    file: str
    chain: tuple[str, ...]  # this image and the images it extends, nearest first
    model: Model
    platforms: tuple[str, ...]
    runtime: Environment
    builder: Environment
    components: tuple[Component, ...]  # needs before needers
    overlays: tuple[Overlay, ...]
    steps: tuple[Step, ...]
    files: tuple[FileGroup, ...]
    env: tuple[tuple[str, str], ...]
    shell: tuple[str, ...] | None
    healthcheck: Healthcheck | None
    expose: tuple[str, ...]  # PORT/PROTOCOL, as the image config names them
    entrypoint: tuple[str, ...] | None
    cmd: tuple[str, ...] | None
    scan_allow: tuple[ScanAllow, ...]
    variants: tuple[str, ...]
    cuda_verify: CudaVerify = CudaVerify()
    runtime_check: RuntimeCheck = RuntimeCheck()
    build_env: tuple[tuple[str, str], ...] = ()  # variables the runtime's commands see (and the image keeps)
    labels_removed: tuple[str, ...] = ()  # labels set to null that no parent spec gave: the base's, removed
    # -- read straight from their keys (their schema named here: recipe/fields.py NODES) -----------
    abstract: bool = spec_key("abstract", "BOOL", False, "bool")
    description: str = spec_key("description", "TEXT", "")
    install: tuple[str, ...] = spec_key("install", "COMPONENT_NAMES", (), "tuple",
                                        "components whose outputs the runtime receives, in this order")
    workdir: str | None = spec_key("workdir", "ABS", "")
    user: str | None = spec_key("user", "USER", "")
    stopsignal: str | None = spec_key("stopsignal", "SIGNAL", "")
    labels: tuple[tuple[str, str], ...] = spec_key("labels", "LABELS", (), "pairs")
    cuda_archs: tuple[str, ...] = spec_key("cuda-archs", "CUDA_ARCHS", (), "tuple",
                                           "kernel architectures every CUDA binary of the image must carry")
    manifest: str = spec_key("manifest", "MANIFEST", "layer", doc=(
        "where the manifest of pins goes: a layer (/opt/enginebuild/manifest.json) or the label "
        "org.enginebuild.manifest (an image that adds no layer of its own uses the label: its base's layers "
        "stay as they are)"))
    bytecode: bool = spec_key("bytecode", "BOOL", True, "bool", (
        "ship the Python files' bytecode: every layer that holds .py files gets a layer of hash-based .pyc "
        "files compiled by the image's own interpreter (default true; false: a smaller image whose "
        "containers compile what they import at each start)"))
    compile_cache: tuple[tuple[str, str], ...] = spec_key("compile-cache", "CACHE_FOLDERS", (), "pairs", (
        "the engine's compile-cache folders (NAME: FOLDER, e.g. vllm: /root/.cache/vllm): `serve warm` "
        "captures them after a warm-up and pushes them beside the image, `serve up` restores them on a node "
        "whose GPU, driver, CUDA, torch, model and engine arguments are the same"))
    wheres: dict[str, Where] = field(default_factory=dict, compare=False, hash=False)

    def where(self, key: str) -> Where:
        """The file:line a key path was written at, or the spec file itself."""
        while key:
            if key in self.wheres:
                return self.wheres[key]
            key = key.rpartition(".")[0]
        return Where(self.file)

    @property
    def lock_name(self) -> str:
        """lockfiles/<lock_name>.lock: IMAGE, or IMAGE--VARIANT."""
        return self.name.replace(":", "--")

    def used_components(self) -> set[str]:
        """What the runtime installs (`install`, Python requirements taken from a component) and
        everything those need: the components worth locking and building."""
        by_name = {c.name: c for c in self.components}
        todo = list(self.install)
        python = self.runtime.python
        todo += [r.component for r in (python.requirements if python else ()) if r.component]
        used: set[str] = set()
        while todo:
            name = todo.pop()
            if name not in used and name in by_name:
                used.add(name)
                todo += list(by_name[name].needs)
        return used

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)

    @property
    def secret_names(self) -> tuple[str, ...]:
        """Every secret the spec declares, whichever step or component declares it."""
        names = [s for c in self.components for s in c.build.secrets]
        names += [s for c in self.components for step in c.steps for s in step.secrets]
        names += [s for step in self.steps for s in step.secrets]
        return tuple(dict.fromkeys(names))

    @property
    def all_patches(self) -> tuple[tuple[str, PatchRef], ...]:
        out = [(c.name, p) for c in self.components for p in c.patches]
        out += [(o.name, p) for o in self.overlays for p in o.patches]
        return tuple(out)
