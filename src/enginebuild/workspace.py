"""A checkout of a recipe repository: its catalogue, lockfiles and push records, and this machine's store."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild.errors import UserError
from enginebuild.io.files import MEMORY_TMP, mutex, sweep
from enginebuild.io.progress import output
from enginebuild.settings import settings

if TYPE_CHECKING:
    from enginebuild.io.git import Mirrors
    from enginebuild.io.http import Http
    from enginebuild.lock.lockfile import Lock
    from enginebuild.oci.engine import EngineApi
    from enginebuild.oci.registry import RegistryApi
    from enginebuild.plan.image import Options
    from enginebuild.recipe.catalog import Catalog
    from enginebuild.recipe.model import ImageSpec
    from enginebuild.sources.base import Context


@dataclass
class Workspace:
    root: Path
    overrides: tuple[str, ...] = ()
    _specs: dict[str, ImageSpec] = field(default_factory=dict)
    _broken: dict[str, UserError] | None = None  # computed once per command (see broken)
    _build_locks: dict[str, Lock | None] = field(default_factory=dict)  # per-build locks of --set (see lock)
    # the Docker engine a build loads into and checks in (None: this machine's, from DOCKER_HOST); an
    # engine in memory for tests of the build loop in process (tests/helpers/memengine.py)
    docker: EngineApi | None = None
    registries: RegistryApi | None = None  # the client images are pushed with (None: the registries' own APIs)

    def __post_init__(self) -> None:
        from enginebuild.io.git import forget_said

        forget_said()  # each command says the mirrors it fetches from

    @cached_property
    def mirrors(self) -> Mirrors:
        """Where git sources are fetched from instead: enginebuild.yaml's `mirrors` (read on use);
        ENGINEBUILD_GIT_MIRRORS comes first wherever a source is fetched."""
        from enginebuild.recipe.repo_settings import load_repo_settings

        return load_repo_settings(self.root).mirrors

    def context(self, http: Http | None = None, mtime: int = 0) -> Context:
        """What resolving and materialising this checkout's sources may use."""
        from enginebuild.sources.base import Context

        return Context(self.home, http, mtime, self.mirrors) if http is not None else \
            Context(self.home, mtime=mtime, mirrors=self.mirrors)

    @cached_property
    def catalog(self) -> Catalog:
        from enginebuild.recipe.catalog import Catalog  # on use: a no-op `image` never loads a spec

        return Catalog(self.root)

    @property
    def home(self) -> Path:
        return settings().home

    def engine(self) -> EngineApi:
        """The engine images are loaded into, checked in and tagged in."""
        if self.docker is None:
            from enginebuild.oci.engine import Engine

            self.docker = Engine()
        return self.docker

    def registry(self) -> RegistryApi:
        """The client pushes go through."""
        if self.registries is None:
            from enginebuild.oci.registry import RegistryClient

            self.registries = RegistryClient()
        return self.registries

    def spec(self, name: str) -> ImageSpec:
        """The image's spec, validated and linted (warnings go to stderr once)."""
        if name not in self._specs:
            from enginebuild.recipe.lints import lint_spec

            spec = self.catalog.load(name, self.overrides)
            for warning in lint_spec(spec):
                output().say(warning)
            self._specs[name] = spec
        return self._specs[name]

    def lock(self, spec: ImageSpec) -> Lock | None:
        """The image's lock; with `--set` values that change a pinned input, the per-build lock
        that resolves them (lock/perbuild.py), the same for every verb of this run."""
        from enginebuild.lock.lockfile import read_lock

        committed = read_lock(self.root, spec)
        if not self.overrides:
            return committed
        if spec.lock_name not in self._build_locks:
            from enginebuild.lock.perbuild import per_build_lock

            self._build_locks[spec.lock_name] = per_build_lock(self.home, spec, committed, self.overrides,
                                                                    self.mirrors)
        return self._build_locks[spec.lock_name]

    def plan_options(self, *, build_args: dict[str, str] | None = None, on: str | None = None,
                     only: frozenset[str] | None = None, strict: bool = True) -> Options:
        """Options for planning here: what is given, the environment's SOURCE_DATE_EPOCH (the
        plan itself reads no environment) and the checkout's routes files (lock/routesfile.py)."""
        from enginebuild.lock.routesfile import committed
        from enginebuild.plan.image import LAYER_KINDS, Options

        return Options(build_args=build_args or {}, on=on, only=only or frozenset(LAYER_KINDS), strict=strict,
                       source_date_epoch=settings().source_date_epoch, facts=committed(self.root))

    def broken(self) -> dict[str, UserError]:
        """The catalogue's specs that do not load, each with its error (one bad spec does not stop
        a command that goes over the whole catalogue: it is reported as one row)."""
        if self._broken is not None:
            return self._broken
        out = {}
        for name in self.catalog.names():
            try:
                self.spec(name)
            except UserError as exc:
                out[name] = exc
        self._broken = out
        return out

    def buildable(self) -> list[str]:
        """Every image that is not abstract, and every variant of each (specs that do not load are
        left out: `broken` names them)."""
        out = []
        broken = self.broken()
        for name in self.catalog.names():
            if name in broken:
                continue
            spec = self.spec(name)
            if spec.abstract:
                continue
            out.append(name)
            out += [f"{name}:{v}" for v in spec.variants]
        return out

    def select(self, names: list[str], *, all_when_empty: bool = True) -> list[str]:
        if names:
            for name in names:
                spec = self.spec(name)
                if spec.abstract:
                    raise UserError(f"{spec.file}: {name} is abstract (a shared definition other images extend); "
                                    "it has no lock and is not built on its own")
            return list(dict.fromkeys(names))
        if all_when_empty:
            for name, exc in self.broken().items():
                output().say(f"{name}: skipped, its spec does not load: {exc.message}")
            return self.buildable()
        raise UserError("name at least one image")

    @contextlib.contextmanager
    def state_mutex(self, what: str = "this checkout's lockfiles") -> Iterator[None]:
        """Serialises commands that write lockfiles or push records in this checkout."""
        folder = self.root / ".enginebuild"
        folder.mkdir(exist_ok=True)
        if not (folder / ".gitignore").exists():  # this checkout's own state: never a file to commit
            (folder / ".gitignore").write_text("# enginebuild's state for this checkout (a mutex): not committed\n*\n")
        with mutex(folder / "lock", what, say=output().say):
            sweep(self.root / "lockfiles")
            yield

    def sweep(self, own: bool = False) -> None:
        """Remove what killed runs left behind (partial downloads, contexts, temporaries); with
        `own`, what this process leaves as it stops on an error or a signal."""
        import tempfile

        from enginebuild.io.store import Store

        Store(self.home).sweep(own)
        sweep(Path(tempfile.gettempdir()), own=own)
        sweep(MEMORY_TMP, own=own)  # wheels a run was unpacking in memory
