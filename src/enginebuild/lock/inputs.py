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

from dataclasses import dataclass
from typing import Any

from enginebuild.errors import Where
from enginebuild.lock.pins import ImagePin, PyPin, PythonPin, SystemPin, ToolPin
from enginebuild.sources import Source
from enginebuild.spec.model import Component, Environment, ImageSpec, Release
from enginebuild.wire import JsonDoc

CUOBJDUMP = ("nvidia-cuda-cuobjdump", "13.5.37")


@dataclass(frozen=True)
class Input:
    name: str
    kind: str  # source | base | system | python | tool | release
    where: Where
    source: Source | None = None
    env: Environment | None = None
    platform: str | None = None
    role: str = ""
    release: Release | None = None
    python: str = ""  # the CPython version a release's wheel is chosen for

    def request(self) -> JsonDoc:
        if self.kind == "source":
            assert self.source is not None
            body = self.source.request_json()
            assert body is not None
            return body
        if self.kind == "tool":
            return {"name": CUOBJDUMP[0], "version": CUOBJDUMP[1]}
        if self.kind == "release":
            assert self.release is not None and self.platform is not None
            return {"name": self.release.name, "version": self.release.version, "index": self.release.index,
                    "platform": self.platform, "python": self.python}
        assert self.env is not None and self.platform is not None
        if self.kind == "base":
            return {"ref": self.env.base, "platform": self.platform}
        if self.kind == "system":
            s = self.env.system
            assert s is not None
            return {"packages": sorted(s.packages), "install": s.install, "upgrade": s.upgrade,
                    "archives": [{"url": a.url, "suite": a.suite, "components": list(a.components), "flat": a.flat,
                                  "fingerprint": a.fingerprint} for a in s.archives],
                    "platform": self.platform, "base": self.env.base}
        p = self.env.python
        assert p is not None
        reqs = []
        for r in p.requirements:
            entry: dict[str, Any] = {"requirement": r.text}
            for key in ("index", "git_url", "git_ref", "url", "sha256", "component"):
                if getattr(r, key):
                    entry[key] = getattr(r, key)
            if not r.deps:
                entry["deps"] = False
            if r.requires_from:
                entry["requires_from"] = list(r.requires_from)
            reqs.append(entry)
        return {"requirements": reqs, "indexes": [list(i) for i in p.indexes], "python": p.version,
                "constraints": list(p.constraints), "platform": self.platform, "base": self.env.base,
                **({"overrides": list(p.overrides)} if p.overrides else {})}

    def decode(self, data: JsonDoc) -> Any:
        if self.kind == "source":
            assert self.source is not None
            return self.source.impl.pin_from_json(data)
        pin_types: dict[str, Any] = {"base": ImagePin, "system": SystemPin, "python": PythonPin, "tool": ToolPin,
                                     "release": PyPin}
        return pin_types[self.kind].from_json(data)

    def encode(self, pin: Any) -> JsonDoc:
        if self.kind == "source":
            assert self.source is not None
            return self.source.impl.pin_json(pin)
        return dict(pin.to_json())


def environments(spec: ImageSpec) -> list[tuple[str, Environment]]:
    """(role, environment) of every distinct environment the image uses, runtime first."""
    out: list[tuple[str, Environment]] = [("runtime", spec.runtime)]
    used = spec.used_components()
    if any(c.release is None and c.name in used for c in spec.components):
        out.append(("builder", spec.builder))
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


def image_inputs(spec: ImageSpec) -> list[Input]:
    out: list[Input] = []
    # sources first: the Python closure reads what a component's wheel needs from its source.
    # A component nothing installs or needs is not built, so nothing of it is locked but the
    # source its patch stack applies to, which `patches check` checks either way
    used = spec.used_components()
    for comp in spec.components:
        if comp.name not in used:
            if comp.patches and comp.source and comp.source.pinned_by_lock:
                out.append(Input(f"components.{comp.name}.source", "source", comp.source.where, source=comp.source))
            continue
        if comp.release is not None:
            out += [Input(release_input(comp.name, platform), "release", comp.where, platform=platform,
                          release=comp.release, python=release_python(spec, comp)) for platform in spec.platforms]
        if comp.source and comp.source.pinned_by_lock:
            out.append(Input(f"components.{comp.name}.source", "source", comp.source.where, source=comp.source))
        for extra in comp.sources:
            if extra.source.pinned_by_lock:
                out.append(Input(f"components.{comp.name}.sources.{extra.name}", "source", extra.source.where,
                                 source=extra.source))
    for role, env in environments(spec):
        where = spec.where("builder" if role == "builder" else role.rsplit(".builder", 1)[0] if role != "runtime"
                           else "base")
        for platform in spec.platforms:
            if env.base != "scratch":
                out.append(Input(env_input(role, "base", platform), "base", where, env=env, platform=platform,
                                 role=role))
            if env.system and env.system.packages:
                out.append(Input(env_input(role, "system", platform), "system", where, env=env, platform=platform,
                                 role=role))
            if env.python and env.python.requirements:
                out.append(Input(env_input(role, "python", platform), "python", where, env=env, platform=platform,
                                 role=role))
    for overlay in spec.overlays:
        if overlay.source.pinned_by_lock:
            out.append(Input(f"overlays.{overlay.name}.source", "source", overlay.source.where, source=overlay.source))
    if spec.cuda_archs or any(c.cuda_archs for c in spec.components):
        out.append(Input("tools.cuobjdump", "tool", spec.where("cuda-archs")))
    return out
