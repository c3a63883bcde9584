"""What every layer kind says about itself, and what writing a layer is given.

A layer kind is a `LayerPayload` subclass in a module of its own: its data, how its bytes are
written (`write`), what it needs downloaded, how `render` shows it, what `render --bake` does
with it, which component made its files. Nothing else asks which kind a layer is."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from enginebuild.core import keys
from enginebuild.errors import BuildFailed
from enginebuild.layerkinds.context import ContextItem
from enginebuild.lock.pins import PyPin
from enginebuild.recipe.model import FileEntry, Outputs

if TYPE_CHECKING:
    from enginebuild.io.git import Mirrors
    from enginebuild.io.store import Store
    from enginebuild.io.tars import TarWriter
    from enginebuild.oci.engine import EngineApi


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
class Commands:
    """What BuildKit runs for a layer: a Dockerfile, its build context, the secrets it mounts."""

    dockerfile: str
    context: tuple[ContextItem, ...]
    secrets: tuple[str, ...] = ()


@dataclass(frozen=True)
class CopiedOutputs:
    """A component's outputs a Dockerfile can copy as they are (`render --bake`)."""

    component: str
    outputs: Outputs


class ComponentOutput(Protocol):
    """What a component's build left in the store (build/outputs.OutputRecord)."""

    @property
    def sha256(self) -> str: ...

    @property
    def wheels(self) -> Sequence[tuple[str, str, int]]: ...


class FilesOfPatches(Protocol):
    """A layer of files a component's patch stack changes, written where its outputs put them."""

    @property
    def component(self) -> str: ...

    @property
    def component_key(self) -> str: ...

    @property
    def paths(self) -> tuple[str, ...]: ...

    def image_path(self, placed: Any) -> str: ...

    def learn(self, store: Store, image: str, record: ComponentOutput, known: Mapping[str, tuple[Any, ...]],
              paths: list[str], mirrors: Mirrors = ()) -> Mapping[str, tuple[Any, ...]]:
        """Whether the component's build installs `paths` verbatim, and where, from its bytes (kept
        in the store with what was `known`)."""
        ...


class BasePuller(Protocol):
    def ensure_pulled(self, ref: str) -> None: ...


@dataclass
class WriteJob:
    """What writing one layer on the host may use."""

    name: str  # the layer's name, for messages
    inputs: Mapping[str, str]  # the layer's named input digests (plan)
    store: Store
    engine: EngineApi
    puller: BasePuller
    image: str  # the image being built, for hints
    outputs: Mapping[str, ComponentOutput] = field(default_factory=dict)  # component key -> its outputs
    chain_image: str | None = None  # the chain below (or what `reads_below` names), loaded, for a kind that `reads_chain`
    whole_chain: Callable[[], str] | None = None  # loads the whole chain below, where `chain_image` is less
    mirrors: Mirrors = ()  # where git sources are fetched from instead (the checkout's)


# modules whose code shapes the bytes of several kinds (see LayerPayload.writer)
INSTALL_WRITER = ("layerkinds/installer.py", "io/tars.py", "io/unpack.py")
PATCH_WRITER = ("patches/check.py", "patches/apply.py", "patches/patched.py", "core/patchfile.py", "core/gitbinary.py",
                "sources/trees.py")


@dataclass(frozen=True)
class LayerPayload:
    """What a layer holds, and how a layer of this kind behaves."""

    by_command: ClassVar[bool] = False  # commands BuildKit runs on the chain below
    reads_chain: ClassVar[bool] = False  # written on the host from files of the chain below (loaded for it)
    starts_tail: ClassVar[bool] = False  # the first layer of the image's tail (the manifest)
    # the modules besides its own whose code shapes its bytes (relative to the package): in its key
    # (plan/writers.py), so a changed writer writes the layer again
    writer: ClassVar[tuple[str, ...]] = ()

    def key(self, epoch: int) -> str:
        """The digest of what shapes its bytes, derived from its fields (core/keys.py): every
        field is keyed unless it says at its declaration that it is not (`unkeyed(why)`) or what of
        it is (`keyed_as`); `epoch`: every entry's time stamp. tests/test_layer_keys.py changes
        each field in turn on every layer the catalogue plans."""
        return keys.derived_key(type(self).__name__, self, epoch=epoch)

    def write(self, job: WriteJob, writer: TarWriter) -> None:
        """Write the layer's entries (a kind enginebuild writes on the host)."""
        raise BuildFailed(f"layer {job.name}: {type(self).__name__} layers are not written on the host")

    def write_layers(self, job: WriteJob, mtime: int) -> list[tuple[str, int]] | None:
        """The blobs (sha256, size) of a kind that writes several layers, or of none (made in the
        store, in order); None for a kind that writes one (`write`)."""
        return None

    def reads_below(self) -> str:
        """For a kind that `reads_chain`: the chain key of the prefix it reads ("": the whole chain below)."""
        return ""

    def compiler(self) -> str:
        """For a layer of bytecode: the interpreter that compiled it ("" for any other kind)."""
        return ""

    def chain_work(self) -> str:
        """What writing it from the chain below did, as the build's line says it (a kind that `reads_chain`)."""
        return "patched on the host"

    def engine_files(self) -> bool:
        """Whether what it holds is the engine's or the recipe's, which the kernel and closure
        checks read; not a distribution's packages nor enginebuild's own manifest."""
        return True

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

    def commands(self) -> Commands | None:
        """What BuildKit runs to make it (a kind that is `by_command`)."""
        return None

    def copied_outputs(self) -> CopiedOutputs | None:
        """A component's outputs copied as they are (`render --bake` copies them from the component)."""
        return None

    def copied_files(self) -> tuple[FileEntry, ...]:
        """Files of the recipe it copies (a file edit remakes only such layers)."""
        return ()

    def python_site(self) -> tuple[str, str] | None:
        """(interpreter, site-packages) it installs Python distributions into."""
        return None

    def may_hold_python_source(self) -> bool:
        """Whether it may hold a `.py` file: an image's checks trust its bytecode only where each
        layer above the first bytecode layer that may is compiled by one above it (checks/imports.py
        `check_python`). Known of a layer of bytecode
        (`.pyc` files only) and of the tail's kinds, which list every file they write (the manifest,
        `files:`); any other kind may. Answered here, from what each kind already says, so that no
        writer's code (and so no layer's key) changes for it."""
        if self.compiler():
            return False
        tail = self.tail_files()
        return not tail or any(f.dest.endswith(".py") for f in tail)

    def compiles(self) -> tuple[str, ...]:
        """The record keys of the layers whose Python files it compiles (a layer of bytecode: the
        `sources` it declares; none for any other kind). Answered here, as above, so that no
        writer's code changes for it."""
        sources = getattr(self, "sources", ()) if self.compiler() else ()
        return tuple(str(s) for s in sources)

    def unpacked_packages(self) -> tuple[str, ...]:
        """The Debian packages it unpacks (without dpkg), by name."""
        return ()

    def patched_files(self) -> FilesOfPatches | None:
        """The source files of a component's patch stack it writes (a layer of patches applied as files)."""
        return None
