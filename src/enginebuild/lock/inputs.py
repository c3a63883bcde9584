"""The inputs of an image, each with its name in the lock: the one place input names are made.

    runtime.base@linux/arm64          the base image, per platform
    runtime.system@linux/arm64        system packages, per platform (architecture)
    runtime.python@linux/arm64        the Python closure, per platform
    builder.* / components.X.builder.*   the same for build environments
    components.X.source, components.X.sources.Y, overlays.X.source
    components.X.release@linux/arm64  a release's wheel a component is taken from, per platform
    tools.cuobjdump                   host tools (images that declare cuda-archs)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from enginebuild.errors import Where
from enginebuild.lock.pins import ImagePin, PyPin, PythonPin, SystemPin, ToolPin
from enginebuild.recipe.model import Component, Environment, ImageSpec, Python, Release, System
from enginebuild.sources import Pinned, Source
from enginebuild.wire import JsonDoc

CUOBJDUMP = ("nvidia-cuda-cuobjdump", "13.5.37")


class WritesJson(Protocol):
    def to_json(self) -> JsonDoc: ...


P = TypeVar("P", bound=WritesJson)


@dataclass(frozen=True)
class Input(Generic[P]):
    """One input of an image, by its name in the lock; each kind is a class of its own, with its
    request as the lock records it and its pin (of type P) read from and written to JSON."""

    name: str
    where: Where
    kind: ClassVar[str] = ""

    def request(self) -> JsonDoc:
        raise NotImplementedError

    def decode(self, data: JsonDoc) -> P:
        """The pin of the lock's `resolved` document."""
        raise NotImplementedError

    def encode(self, pin: P) -> JsonDoc:
        return dict(pin.to_json())

    def placeholder(self) -> P | None:
        """What `render --unpinned` shows for it while the lock does not resolve it."""
        return None

    def serves(self, platform: str) -> bool:
        """Whether a build for `platform` uses it (an input of one platform serves only that one)."""
        return True

    def describe(self) -> str:
        """What it asks for, in one line a reader can check against the spec."""
        return ", ".join(k if v is True else f"{k} {v}" for k, v in self.request().items()
                         if v not in (None, False, "", []))


@dataclass(frozen=True)
class SourceInput(Input[Pinned]):
    """A component's (or overlay's) source: the source kind's own request and pin."""

    source: Source = field(kw_only=True)
    kind: ClassVar[str] = "source"

    def request(self) -> JsonDoc:
        body = self.source.request_json()
        if body is None:
            raise ValueError(f"{self.name}: a source the lock does not pin is no input")
        return body

    def decode(self, data: JsonDoc) -> Pinned:
        return self.source.pin_from_json(data)

    def encode(self, pin: Pinned) -> JsonDoc:
        assert pin.source == self.source, f"{self.name}: not this source's pin"
        return pin.to_json()


@dataclass(frozen=True)
class ToolInput(Input[ToolPin]):
    """A host tool the build runs (the pinned cuobjdump)."""

    kind: ClassVar[str] = "tool"

    def request(self) -> JsonDoc:
        return {"name": CUOBJDUMP[0], "version": CUOBJDUMP[1]}

    def decode(self, data: JsonDoc) -> ToolPin:
        return ToolPin.from_json(data)


@dataclass(frozen=True)
class PlatformInput(Input[P]):
    """An input of one platform's build only."""

    platform: str = field(kw_only=True)

    def serves(self, platform: str) -> bool:
        return platform == self.platform


@dataclass(frozen=True)
class ReleaseInput(PlatformInput[PyPin]):
    """The release wheel a component is taken from, for one platform and CPython."""

    release: Release = field(kw_only=True)
    python: str = field(kw_only=True)
    kind: ClassVar[str] = "release"

    def request(self) -> JsonDoc:
        return {"name": self.release.name, "version": self.release.version, "index": self.release.index,
                "platform": self.platform, "python": self.python}

    def decode(self, data: JsonDoc) -> PyPin:
        return PyPin.from_json(data)


@dataclass(frozen=True)
class EnvInput(PlatformInput[P]):
    """A part of one environment (runtime, builder, a component's builder) on one platform."""

    env: Environment = field(kw_only=True)
    role: str = field(kw_only=True)


@dataclass(frozen=True)
class BaseInput(EnvInput[ImagePin]):
    kind: ClassVar[str] = "base"

    def request(self) -> JsonDoc:
        return {"ref": self.env.base, "platform": self.platform}

    def decode(self, data: JsonDoc) -> ImagePin:
        return ImagePin.from_json(data)

    def placeholder(self) -> ImagePin:
        return ImagePin(f"{self.env.base}  # NOT PINNED", None, None)

    def describe(self) -> str:
        return self.env.base


@dataclass(frozen=True)
class SystemInput(EnvInput[SystemPin]):
    system: System = field(kw_only=True)
    kind: ClassVar[str] = "system"

    def request(self) -> JsonDoc:
        s = self.system
        return {"packages": sorted(s.packages), "install": s.install, "upgrade": s.upgrade,
                "archives": [{"url": a.url, "suite": a.suite, "components": list(a.components), "flat": a.flat,
                              "fingerprint": a.fingerprint} for a in s.archives],
                "platform": self.platform, "base": self.env.base}

    def decode(self, data: JsonDoc) -> SystemPin:
        return SystemPin.from_json(data)

    def placeholder(self) -> SystemPin:
        return SystemPin((), (), ())

    def describe(self) -> str:
        archives = [f"{a.url} {a.suite}" + (" (flat)" if a.flat else f" {' '.join(a.components)}")
                    + (f" key {a.fingerprint}" if a.fingerprint else "") for a in self.system.archives]
        upgrade = ", upgrading what the base has" if self.system.upgrade else ""
        return (f"packages {' '.join(sorted(self.system.packages))}{upgrade}; "
                f"from {'; '.join(archives) or 'the default archive'}")


@dataclass(frozen=True)
class PythonInput(EnvInput[PythonPin]):
    python: Python = field(kw_only=True)
    kind: ClassVar[str] = "python"

    def request(self) -> JsonDoc:
        p = self.python
        reqs = []
        for r in p.requirements:
            entry: JsonDoc = {"requirement": r.text}
            for key in ("index", "git_url", "git_ref", "url", "sha256", "component"):
                if getattr(r, key):
                    entry[key] = getattr(r, key)
            if not r.deps:
                entry["deps"] = False
            if r.requires_from:
                entry["requires_from"] = list(r.requires_from)
            if r.excludes:
                entry["exclude"] = list(r.excludes)
            reqs.append(entry)
        return {"requirements": reqs, "indexes": [list(i) for i in p.indexes], "python": p.version,
                "constraints": list(p.constraints), "platform": self.platform, "base": self.env.base,
                **({"overrides": list(p.overrides)} if p.overrides else {})}

    def decode(self, data: JsonDoc) -> PythonPin:
        return PythonPin.from_json(data)

    def describe(self) -> str:
        reqs = []
        for r in self.python.requirements:
            extra = [f"{key} {getattr(r, key)}" for key in ("index", "component", "url", "git_url", "git_ref")
                     if getattr(r, key)]
            extra += ["no deps"] if not r.deps else []
            extra += [f"its needs from {' '.join(r.requires_from)}"] if r.requires_from else []
            extra += [f"without {', '.join(r.excludes)}"] if r.excludes else []
            reqs.append(r.text + (f" ({', '.join(extra)})" if extra else ""))
        constraints = self.python.constraints
        return (f"Python {self.python.version}: {'; '.join(reqs)}"
                + (f"; constraints {'; '.join(constraints)}" if constraints else ""))

    def placeholder(self) -> PythonPin:
        """A wheel a component builds needs no resolving: it is shown."""
        return PythonPin(tuple(PyPin(r.name, "", "component", component=r.component)
                               for r in self.python.requirements if r.component))


def environments(spec: ImageSpec) -> list[tuple[str, Environment]]:
    """(role, environment) of every distinct environment the image uses, runtime first."""
    out: list[tuple[str, Environment]] = [("runtime", spec.runtime)]
    used = spec.used_components()
    if any(c.release is None and c.name in used and c.builder == spec.builder for c in spec.components):
        out.append(("builder", spec.builder))  # only where a component builds on it
    for comp in spec.components:
        if comp.release is None and comp.name in used:  # a release builds on nothing, an unused one not at all
            out.append((f"components.{comp.name}.builder", comp.builder))
    seen: list[Environment] = []
    unique = []
    for role, env in out:
        if env not in seen:
            seen.append(env)
            unique.append((role, env))
    return unique


def role_of(spec: ImageSpec, env: Environment) -> str:
    return next(role for role, e in environments(spec) if e == env)


def release_input(component: str, platform: str) -> str:
    return f"components.{component}.release@{platform}"


def release_python(spec: ImageSpec, comp: Component) -> str:
    """The CPython a release's wheel is for: the runtime's (which installs what comes of it),
    else the component's builder's; 3 (a py3 wheel) when neither has Python."""
    for python in (spec.runtime.python, comp.builder.python):
        if python is not None:
            return python.version
    return "3"


def env_input(role: str, part: str, platform: str) -> str:
    return f"{role}.{part}@{platform}"


AnyInput = Input[Any]  # one of an image's inputs, whatever its pin's type


def image_inputs(spec: ImageSpec) -> list[AnyInput]:
    """Every input the image's lock pins: sources first (the Python closure reads what a
    component's wheel needs from its source), then the environments', the overlays' sources, tools."""
    out = _component_inputs(spec) + _environment_inputs(spec)
    for overlay in spec.overlays:
        if overlay.source.pinned_by_lock:
            out.append(SourceInput(f"overlays.{overlay.name}.source", overlay.source.where, source=overlay.source))
    if spec.cuda_archs or any(c.cuda_archs for c in spec.components):
        out.append(ToolInput("tools.cuobjdump", spec.where("cuda-archs")))
    return out


def _component_inputs(spec: ImageSpec) -> list[AnyInput]:
    """Each component's release and sources. A component nothing installs or needs is not built,
    so nothing of it is locked but the source its patch stack applies to, which `patches check`
    checks either way."""
    out: list[AnyInput] = []
    used = spec.used_components()
    for comp in spec.components:
        if comp.name not in used:
            if comp.patches and comp.source and comp.source.pinned_by_lock:
                out.append(SourceInput(f"components.{comp.name}.source", comp.source.where, source=comp.source))
            continue
        if comp.release is not None:
            out += [ReleaseInput(release_input(comp.name, platform), comp.where, platform=platform,
                                 release=comp.release, python=release_python(spec, comp)) for platform in spec.platforms]
        if comp.source and comp.source.pinned_by_lock:
            out.append(SourceInput(f"components.{comp.name}.source", comp.source.where, source=comp.source))
        out += [SourceInput(f"components.{comp.name}.sources.{extra.name}", extra.source.where, source=extra.source)
                for extra in comp.sources if extra.source.pinned_by_lock]
    return out


def _environment_inputs(spec: ImageSpec) -> list[AnyInput]:
    """Each environment's base, system packages and Python closure, per platform."""
    out: list[AnyInput] = []
    for role, env in environments(spec):
        where = spec.where("builder" if role == "builder" else role.rsplit(".builder", 1)[0] if role != "runtime"
                           else "base")
        for platform in spec.platforms:
            if env.base != "scratch":
                out.append(BaseInput(env_input(role, "base", platform), where, env=env, platform=platform, role=role))
            if env.system and env.system.packages:
                out.append(SystemInput(env_input(role, "system", platform), where, env=env, platform=platform,
                                       role=role, system=env.system))
            if env.python and env.python.requirements:
                out.append(PythonInput(env_input(role, "python", platform), where, env=env, platform=platform,
                                       role=role, python=env.python))
    return out
