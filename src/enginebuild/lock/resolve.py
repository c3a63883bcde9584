"""Resolving an image's floating inputs into a Lock.

Unchanged inputs keep their pins (all are re-resolved with `update`). An input that cannot
be resolved where `lock` runs is recorded as unresolved, with the reason; but when it was
pinned before and its request did not change, the previous pin is kept and the failure is
reported: a flaky archive never turns good pins into holes.
"""

from __future__ import annotations

import datetime as dt
import difflib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from enginebuild.core.platforms import Platform
from enginebuild.errors import EngineBuildError, ResolveError, SpecError, UserError, Where
from enginebuild.io.git import Mirrors
from enginebuild.io.http import Http
from enginebuild.lock.base import resolve_base
from enginebuild.lock.debian import ArchiveSet, DebianArchive, installed_packages
from enginebuild.lock.inputs import (
    CUOBJDUMP,
    AnyInput,
    BaseInput,
    EnvInput,
    PythonInput,
    ReleaseInput,
    SourceInput,
    SystemInput,
    ToolInput,
    env_input,
    image_inputs,
)
from enginebuild.lock.interpreters import interpreter_mismatch
from enginebuild.lock.lockfile import Entry, Lock
from enginebuild.lock.pins import ImagePin, PyPin, PythonPin, SystemPin, ToolPin
from enginebuild.lock.python import resolve_python
from enginebuild.lock.release import resolve_release
from enginebuild.lock.wheeldeps import wheel_requirements
from enginebuild.oci.reference import parse_image_ref
from enginebuild.oci.registry import RegistryClient
from enginebuild.oci.rootfs import read_files
from enginebuild.recipe.model import Archive, ImageSpec, PyRequirement, Python
from enginebuild.sources.base import DEFAULT_INDEX, Context
from enginebuild.sources.pyindex import project_files, version_of_file

Report = Callable[[str, str, str], None]


@dataclass
class Resolvers:
    home: Path
    http: Http = field(default_factory=Http)
    registry: RegistryClient | None = None
    mirrors: Mirrors = ()  # where git sources are fetched from instead (the checkout's enginebuild.yaml)
    _archives: dict[tuple[object, ...], DebianArchive] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.registry = self.registry or RegistryClient(self.http)

    @property
    def client(self) -> RegistryClient:
        assert self.registry is not None
        return self.registry

    def context(self) -> Context:
        return Context(self.home, self.http, mirrors=self.mirrors)

    def archive(self, archive: Archive, arch: str) -> DebianArchive:
        key = (archive, arch)
        if key not in self._archives:
            keyring = None
            if archive.keyring and archive.keyring.file:
                keyring = archive.keyring.file
            elif archive.keyring and archive.keyring.url and archive.keyring.sha256:
                keyring = self.context().store.fetch(self.http, [archive.keyring.url], archive.keyring.sha256,
                                                     f"keyring of {archive.url}")
            elif archive.keyring and archive.keyring.url:
                # no sha256: the key is pinned by the archive's fingerprint, which its InRelease
                # must be signed with; the file itself is only a carrier
                data = self.http.request("GET", archive.keyring.url).content
                store = self.context().store
                keyring = store.path(store.put_bytes(data, f"keyring of {archive.url}").sha256)
            loaded = DebianArchive(self.http, archive, arch, keyring)
            loaded.load()
            self._archives[key] = loaded
        return self._archives[key]


def _where_of_requirements(python: Python) -> dict[str, str]:
    """Where each name is required: every place, the spec's lines and the component files read."""
    out: dict[str, list[str]] = {}
    for r in python.requirements:
        places = out.setdefault(r.name, [])
        if str(r.where) not in places:
            places.append(str(r.where))
    return {name: "; ".join(places) for name, places in out.items()}


def resolve_input(r: Resolvers, spec: ImageSpec, inp: AnyInput, done: dict[str, object]) -> object:
    if isinstance(inp, SourceInput):
        return inp.source.resolve(r.context())
    if isinstance(inp, ToolInput):
        return resolve_tool(r)
    if isinstance(inp, ReleaseInput):
        return resolve_release(r.http, inp.release, inp.python, inp.platform)
    if not isinstance(inp, EnvInput):
        raise TypeError(f"{inp.name}: no resolver for {type(inp).__name__}")
    env, platform = inp.env, inp.platform
    base_pin = done.get(env_input(inp.role, "base", platform))
    if isinstance(inp, BaseInput):
        return resolve_base(r.client, env.base, platform, read_python=bool(env.python and env.python.requirements))
    if isinstance(inp, SystemInput):
        system = inp.system
        archives = ArchiveSet([r.archive(a, Platform.parse(platform).debian) for a in system.archives])
        installed = None
        if system.upgrade and env.base != "scratch":
            installed = installed_packages(_dpkg_status(r, base_pin, env.base, platform))
        pins = archives.closure(system.packages, skip_required=system.install == "dpkg" and env.base != "scratch",
                                installed=installed, upgrade=system.upgrade)
        return SystemPin(tuple(a.base for a in archives.archives), tuple(a.signature for a in archives.archives),
                         tuple(pins))
    assert isinstance(inp, PythonInput)
    python, read = with_wheel_requirements(r, spec, inp.python, done)
    if env.base != "scratch" and not isinstance(base_pin, ImagePin):
        # listed anyway, so the closure is visible; marked, and re-resolved once the base can be read
        pin = resolve_python(r.home, python, platform, None, _where_of_requirements(python))
        return PythonPin(pin.packages, None, f"resolved without the distributions of {env.base}, which could not "
                                             "be read here; `lock` resolves it again where the base is reachable",
                         read)
    image = base_pin if isinstance(base_pin, ImagePin) else None  # none: FROM scratch
    return replace(resolve_python(r.home, python, platform, image, _where_of_requirements(python)),
                   wheel_sources=read)


def with_wheel_requirements(r: Resolvers, spec: ImageSpec, python: Python,
                            done: dict[str, object]) -> tuple[Python, tuple[tuple[str, str], ...]]:
    """The requirements with what each component's wheel needs (read from its pinned source)
    in front, and (component, source identity) of each source read."""
    extra: list[PyRequirement] = []
    read: list[tuple[str, str]] = []
    for req in python.requirements:
        if not req.component or not req.deps:
            continue
        comp = spec.component(req.component)
        pinned = comp.source.at(done, f"components.{comp.name}.source") if comp.source is not None else None
        if pinned is not None and not pinned.complete:
            raise ResolveError(f"{req.where}: the source of component {comp.name} is not pinned, so what its "
                               "wheel needs cannot be read")
        stated = wheel_requirements(comp, req, pinned, r.context())
        named = {requirement_name(text) for text, _ in stated}
        unstated = [name for name in req.excludes if name not in named]
        if unstated:  # a typo excludes nothing, and the need it meant stays in
            close = difflib.get_close_matches(unstated[0], sorted(n for n in named if n), n=1)
            raise ResolveError(f"{req.where}: exclude: {unstated[0]!r} is not a need the files of component "
                               f"{comp.name}'s source state, so it excludes nothing",
                               hint=f"did you mean {close[0]!r}?" if close else
                               f"the files state: {', '.join(sorted(n for n in named if n))}")
        extra += [PyRequirement(text, Where(f"{path} of component {comp.name}'s source (read for {req.where})"))
                  for text, path in stated if not req.excludes or requirement_name(text) not in req.excludes]
        if pinned is not None:
            read.append((comp.name, pinned.identity()))
    return replace(python, requirements=(*extra, *python.requirements)), tuple(read)


def requirement_name(text: str) -> str:
    """The canonical name a requirement line asks for ("" for one that is not a requirement)."""
    try:
        return str(canonicalize_name(Requirement(text).name))
    except InvalidRequirement:
        return ""


def needs_again(spec: ImageSpec, inp: AnyInput, pin: object, done: dict[str, object]) -> bool:
    """A Python closure resolved against another base (or none) than the one locked now, or
    holding what a component's wheel needs, read from another source than the one locked now."""
    if not isinstance(inp, PythonInput) or not isinstance(pin, PythonPin):
        return False
    base = done.get(env_input(inp.role, "base", inp.platform))
    # a base whose distributions could not be read cannot constrain it better: resolving again
    # would only move pins nobody asked to move
    if inp.env.base != "scratch" and isinstance(base, ImagePin) and base.dists is not None \
            and base.digest != pin.base_digest:
        return True
    for component, identity in pin.wheel_sources:  # a git ref moved, a version was bumped
        comp = next((c for c in spec.components if c.name == component), None)
        if comp is None or comp.source is None:
            continue
        pinned = comp.source.at(done, f"components.{component}.source")
        if pinned.pin is not None and pinned.identity() != identity:
            return True
    return False


def _dpkg_status(r: Resolvers, base_pin: object, base: str, platform: str) -> bytes:
    if not isinstance(base_pin, ImagePin) or not base_pin.digest:
        raise ResolveError(f"system.upgrade needs the base {base} resolved first")
    ref = parse_image_ref(base_pin.ref)
    _, manifest, _ = r.client.platform_manifest(ref, platform)
    files = read_files(r.client, ref, manifest, lambda p: p == "var/lib/dpkg/status", limit=1 << 26)
    return files.get("var/lib/dpkg/status", b"")


def resolve_tool(r: Resolvers) -> ToolPin:
    name, version = CUOBJDUMP
    files = project_files(r.http, DEFAULT_INDEX, name)
    out = []
    for machine in ("x86_64", "aarch64"):
        match = [f for f in files if f.filename.endswith(".whl") and version_of_file(name, f.filename) == version
                 and "linux" in f.filename.rsplit("-", 1)[-1] and machine in f.filename.rsplit("-", 1)[-1]]
        if not match:
            raise ResolveError(f"{name}=={version} has no wheel for linux {machine} on {DEFAULT_INDEX}")
        f = match[0]
        out.append((machine, PyPin(name, version, "index", f.filename, f.url, f.sha256, f.size, DEFAULT_INDEX)))
    return ToolPin(name, version, tuple(out))


def now_utc() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def check_interpreters(spec: ImageSpec, done: dict[str, object]) -> None:
    """Each environment's `python.version` against the interpreter it will really have."""

    for inp in image_inputs(spec):
        if not isinstance(inp, PythonInput):
            continue
        why = interpreter_mismatch(inp.python, done.get(env_input(inp.role, "system", inp.platform)),
                                   done.get(env_input(inp.role, "base", inp.platform)))
        if why:
            path = "python.version" if inp.role == "runtime" else f"{inp.role}.python.version"
            raise SpecError(spec.where(path), path, why,
                            hint="set python.version to the interpreter's, or install the interpreter you name")


HINT = "; hint: "  # between why an input is unresolved and what its resolver says to do


def build_lock(r: Resolvers, spec: ImageSpec, previous: Lock | None, *, update: bool,
               report: Report = lambda name, status, detail: None, keep_unresolved: bool = False) -> Lock:
    """Resolve what is new, changed or unresolved (everything with update=True); keep the rest.
    With `keep_unresolved`, an input the previous lock left unresolved and the spec did not change
    stays unresolved (a per-build lock resolves what its `--set` changed, nothing else)."""
    entries: dict[str, Entry] = {}
    done: dict[str, object] = {}
    for inp in image_inputs(spec):
        request = inp.request()
        old = previous.entries.get(inp.name) if previous else None
        same = old is not None and old.request == request and old.resolved is not None
        if keep_unresolved and old is not None and old.request == request and old.resolved is None:
            entries[inp.name] = old
            report(inp.name, "kept", "")
            continue
        if same and not update:
            assert old is not None
            kept = inp.decode(old.resolved or {})
            if not needs_again(spec, inp, kept, done):
                entries[inp.name] = old
                done[inp.name] = kept
                report(inp.name, "kept", "")
                continue
        try:
            pin = resolve_input(r, spec, inp, done)
        except UserError:
            raise
        except EngineBuildError as exc:
            why = exc.message + (f"{HINT}{exc.hint}" if exc.hint else "")
            if same:
                assert old is not None
                entries[inp.name] = old
                done[inp.name] = inp.decode(old.resolved or {})
                report(inp.name, "kept-after-failure", why)
            else:
                entries[inp.name] = Entry(request, None, why)
                report(inp.name, "unresolved", why)
            continue
        done[inp.name] = pin
        resolved = inp.encode(pin)
        entries[inp.name] = Entry(request, resolved)
        status = "new" if old is None else ("same" if old.resolved == resolved else "changed")
        report(inp.name, status, "")
    check_interpreters(spec, done)
    unchanged = previous is not None and {n: e.to_json() for n, e in previous.entries.items()} == \
        {n: e.to_json() for n, e in entries.items()}
    created = previous.created if previous is not None and unchanged else now_utc()
    return Lock(spec.name, created, entries)
