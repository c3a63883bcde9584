"""Builders: the Docker engines components are built on, this machine's or other machines'.

A builder is an engine reached as Docker reaches it (a DOCKER_HOST address or a Docker
context: see oci/endpoint.py) and the platforms it builds natively, read from the engine
unless stated. Each has its own BuildKit client (the docker CLI pointed at it), its own
view of which chain images it holds, and is told the builder environment of what it builds
by `docker load` of the stored layers. What a component keeps is read back from its engine
into the store (and from there to the registry cache), so the runtime is assembled where
enginebuild runs. `assign` spreads the components to build over the builders; a builder
that cannot be reached at the start is left out, named.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from enginebuild.core.platforms import HOST, Platform
from enginebuild.errors import EngineBuildError, UserError
from enginebuild.execution.assemble import Assembler
from enginebuild.execution.buildkit import Builder, detect_builder
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.oci.endpoint import Endpoint, local_endpoint, parse_endpoint
from enginebuild.oci.engine import Engine, EngineApi
from enginebuild.plan.envs import CHAIN_REPO
from enginebuild.recipe.repo_settings import BuilderEntry

LOCAL = "local"
HOST_PLATFORM = str(HOST)


@dataclass(frozen=True)
class BuilderSpec:
    name: str
    endpoint: Endpoint
    platforms: tuple[str, ...] = ()  # stated; empty: read from the engine


def builder_specs(values: Iterable[str], configured: Iterable[BuilderEntry] = ()) -> list[BuilderSpec]:
    """`--builder` values (`local`, a builder of enginebuild.yaml, `[NAME=]ADDRESS`, a Docker
    context), else the builders of enginebuild.yaml, else this machine's engine alone."""
    entries = {e.name: e for e in configured}
    values = list(values)
    if not values:
        if not entries:
            return [BuilderSpec(LOCAL, local_endpoint())]
        return [_configured(e) for e in entries.values()]
    out = []
    for value in values:
        name, sep, address = value.partition("=")
        if value == LOCAL:
            out.append(BuilderSpec(LOCAL, local_endpoint()))
        elif value in entries:
            out.append(_configured(entries[value]))
        elif sep and "://" not in name:
            out.append(BuilderSpec(name, parse_endpoint(address)))
        else:
            endpoint = parse_endpoint(value)
            out.append(BuilderSpec(endpoint.context or value, endpoint))
    names = [s.name for s in out]
    for name in names:
        if names.count(name) > 1:
            raise UserError(f"--builder {name}: given twice")
    return out


def _configured(entry: BuilderEntry) -> BuilderSpec:
    return BuilderSpec(entry.name, parse_endpoint(entry.address, entry.where), tuple(entry.platforms))


class Site:
    """One builder as a build uses it: its engine, the chains it holds, its BuildKit client."""

    def __init__(self, spec: BuilderSpec, engine: EngineApi, platforms: tuple[str, ...], store: Store, *,
                 buildx_name: str | None = None, fresh: bool = False):
        self.name, self.spec, self.engine, self.platforms = spec.name, spec, engine, platforms
        self.assembler = Assembler(engine, store)
        self._known: set[str] | None = set() if fresh else None  # read from the engine when first needed
        self._known_lock = threading.Lock()
        self.chain_lock = threading.Lock()
        self.loaded: list[str] = []  # chain tags this run loaded
        self.lost = False
        self.fresh, self.buildx_name = fresh, buildx_name
        self._builder: Builder | None = None

    @property
    def known(self) -> set[str]:
        """The chain images the engine holds (asked once, on first use: `render --out` of an
        image whose contexts need no chain never reaches the engine)."""
        with self._known_lock:
            if self._known is None:
                self._known = self.engine.tags_of(CHAIN_REPO)
            return self._known

    @property
    def remote(self) -> bool:
        return self.spec.endpoint != local_endpoint()

    def builder(self) -> Builder:
        if self._builder is None:
            found = detect_builder(None if self.remote else self.buildx_name)
            env = tuple(self.spec.endpoint.cli_env().items()) + (("BUILDX_BUILDER", ""),) if self.remote else ()
            self._builder = dataclasses.replace(found, no_cache=self.fresh, env=env,
                                                builder_name=None if self.remote else found.builder_name,
                                                engine=self.spec.endpoint.describe())
            where = f" on builder {self.name} ({self.spec.endpoint.describe()})" if self.remote else ""
            output().say(f"  builder: BuildKit, driven by `{self._builder.describe()}`{where} (component builds "
                         "and command layers run there; enginebuild writes every other layer itself)")
        return self._builder

    def alive(self) -> bool:
        if not self.lost and not self.engine.ping():
            self.lost = True
        return not self.lost


def native_platforms(engine: EngineApi) -> tuple[str, ...]:
    info = engine.info()
    machine = str(info.get("Architecture", ""))
    return (str(Platform.of_machine(machine)),) if machine else ()


def connect(specs: list[BuilderSpec], store: Store, *, local: Site, fresh: bool = False) -> list[Site]:
    """A site for every builder that answers (this machine's engine is `local`, already in use);
    one that does not answer is named and left out."""
    sites = []
    for spec in specs:
        if spec.endpoint == local.spec.endpoint:
            local.name, local.platforms = spec.name, spec.platforms or local.platforms
            sites.append(local)
            continue
        engine = Engine(spec.endpoint)
        try:
            why = Engine(spec.endpoint, timeout=15).unreachable()
            if why is not None:
                raise EngineBuildError(why)
            platforms = spec.platforms or native_platforms(engine)
            sites.append(Site(spec, engine, platforms, store, fresh=fresh))
        except EngineBuildError as exc:
            if len(specs) == 1:  # the only builder: the build cannot go on, named
                raise EngineBuildError(f"builder {spec.name} ({spec.endpoint.describe()}) is unreachable: {exc.message}",
                                hint="start its engine (`docker -H ADDRESS version` tells), or name another "
                                     "with --builder") from None
            output().say(f"  builder {spec.name} ({spec.endpoint.describe()}): unreachable ({exc.message}); skipped")
    if not sites:
        raise UserError("no builder answers: " + ", ".join(f"{s.name} ({s.endpoint.describe()})" for s in specs),
                        hint="start the engines, or name others with --builder")
    return sites


def capable(sites: Iterable[Site], platform: str) -> list[Site]:
    """The builders for a platform: those that build it natively, else every one (emulated)."""
    alive = [s for s in sites if not s.lost]
    return [s for s in alive if platform in s.platforms] or alive


def assign(work: list[tuple[str, float]], platform: str, sites: list[Site]) -> dict[str, Site]:
    """Components (name, expected seconds) to builders: the longest first, each to the capable
    builder with the least work assigned so far (the first listed on a tie)."""
    load = {s.name: 0.0 for s in sites}
    out = {}
    for name, seconds in sorted(work, key=lambda w: -w[1]):
        pool = capable(sites, platform)
        if not pool:
            raise UserError(f"no builder left to build component {name}")
        site = min(pool, key=lambda s: load[s.name])
        load[site.name] += max(seconds, 1.0)
        out[name] = site
    return out
