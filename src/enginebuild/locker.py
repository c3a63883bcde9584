"""Resolving an image's floating inputs into a Lock."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.errors import EngineBuildError
from enginebuild.http import Http
from enginebuild.lockfile import Lock, requests_for
from enginebuild.reference import parse_image_ref
from enginebuild.registry import RegistryClient
from enginebuild.resolve.debian import DebianArchive
from enginebuild.resolve.gitsource import Mirror
from enginebuild.resolve.pypi import PyPI, target_tags
from enginebuild.spec import ImageSpec, Source


@dataclass
class Resolvers:
    home: Path
    http: Http = field(default_factory=Http)
    registry: RegistryClient | None = None
    _archives: dict = field(default_factory=dict)
    _indexes: dict = field(default_factory=dict)

    def __post_init__(self):
        self.registry = self.registry or RegistryClient(self.http)

    def pypi(self, index: str) -> PyPI:
        if index not in self._indexes:
            self._indexes[index] = PyPI(self.http, index)
        return self._indexes[index]

    def archive(self, url, suite, components, arch) -> DebianArchive:
        key = (url, suite, tuple(components), arch)
        if key not in self._archives:
            archive = DebianArchive(self.http, url, suite, tuple(components), arch)
            archive.load()
            self._archives[key] = archive
        return self._archives[key]


def resolve_source(resolvers: Resolvers, source: Source, default_index: str = "https://pypi.org") -> dict:
    if source.kind == "git":
        commit = Mirror(resolvers.home, source.url).resolve(source.ref)
        return {"kind": "git", "url": source.url, "commit": commit}
    if source.kind == "pypi":
        sdist = resolvers.pypi(default_index).resolve_sdist(source.name, source.version)
        return {"kind": "pypi", **sdist}
    return {"kind": "path"}


def resolve_input(resolvers: Resolvers, spec: ImageSpec, name: str) -> dict:
    if name == "base":
        if spec.base == "scratch":
            return {"ref": "scratch"}
        ref = parse_image_ref(spec.base)
        if ref.digest:
            return {"ref": ref.with_digest(ref.digest), "digest": ref.digest}
        digest, media_type = resolvers.registry.manifest_digest(ref)
        return {"ref": ref.with_digest(digest), "digest": digest, "media_type": media_type}
    if name == "system":
        s = spec.system
        archive = resolvers.archive(s.archive_url, s.suite, s.components, spec.arch)
        packages = archive.closure(s.packages, skip_required=s.install == "dpkg")
        return {"archive": s.archive_url, "signature_verified": archive.signature, "packages": packages}
    if name == "python":
        p = spec.python
        tags = target_tags(p.version, spec.arch)
        index = resolvers.pypi(p.index)
        return {"files": [index.resolve_requirement(r, tags) for r in p.requirements]}
    if name == "engine":
        return resolve_source(resolvers, spec.engine.source)
    if name.startswith("vendor."):
        vendor = next(v for v in spec.engine.vendor if f"vendor.{v.name}" == name)
        return resolve_source(resolvers, vendor.source)
    if name.startswith("plugin."):
        plugin = next(p for p in spec.plugins if f"plugin.{p.name}" == name)
        return resolve_source(resolvers, plugin.source)
    raise KeyError(name)


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def build_lock(resolvers: Resolvers, spec: ImageSpec, previous: Lock | None, *, update: bool,
               report=lambda name, status, detail: None) -> Lock:
    """Resolve what is new, changed or unresolved (everything with update=True); keep the rest."""
    inputs = {}
    for name, request in requests_for(spec).items():
        old = previous.inputs.get(name) if previous else None
        if old and old["request"] == request and old.get("resolved") is not None and not update:
            inputs[name] = old
            report(name, "kept", "")
            continue
        try:
            resolved = resolve_input(resolvers, spec, name)
        except EngineBuildError as exc:
            why = exc.message + (f"; {exc.hint}" if exc.hint else "")
            inputs[name] = {"request": request, "resolved": None, "unresolved": why}
            report(name, "unresolved", why)
            continue
        inputs[name] = {"request": request, "resolved": resolved}
        report(name, "changed" if old and old.get("resolved") != resolved else ("new" if not old else "same"), "")
    created = previous.created if previous and previous.inputs == inputs else now_utc()
    return Lock(image=spec.name, created=created, inputs=inputs)
