"""Typed pins: what a lock records for each kind of input, with its JSON form.

Source pins (git commits, sdists, URLs) are defined by their kinds in sources/; the pins
of environments (base images, system packages, Python distributions) and of tools are here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from enginebuild.core.keys import unkeyed
from enginebuild.wire import JsonDoc


@dataclass(frozen=True)
class ImagePin:
    """A base image for one platform: the manifest to build on, and what its config says."""

    ref: str  # repo@sha256:<platform manifest>, or "scratch"
    digest: str | None  # the platform's manifest digest
    index_digest: str | None  # the tag's index digest, when the tag names several platforms
    env: tuple[tuple[str, str], ...] = ()
    dists: tuple[tuple[str, str], ...] | None = None  # Python distributions the base ships, when read
    note: str = ""  # what could not be read here (a base pinned by digest whose registry is unreachable)
    dist_folders: tuple[tuple[str, str], ...] = ()  # name -> its .dist-info folder in the base (no leading /)

    def dist_folder(self, name: str) -> str:
        return dict(self.dist_folders).get(name, "")

    @property
    def scratch(self) -> bool:
        return self.ref == "scratch"

    def to_json(self) -> JsonDoc:
        body: JsonDoc = {"ref": self.ref, "digest": self.digest}
        if self.index_digest:
            body["index_digest"] = self.index_digest
        if self.env:
            body["env"] = [list(p) for p in self.env]
        if self.dists is not None:
            body["python_dists"] = [list(p) for p in self.dists]
        if self.note:
            body["note"] = self.note
        if self.dist_folders:
            body["python_dist_folders"] = [list(p) for p in self.dist_folders]
        return body

    @classmethod
    def from_json(cls, data: JsonDoc) -> ImagePin:
        dists = data.get("python_dists")
        return cls(str(data["ref"]), data.get("digest"), data.get("index_digest"),
                   tuple((str(k), str(v)) for k, v in data.get("env") or ()),
                   tuple((str(n), str(v)) for n, v in dists) if dists is not None else None,
                   str(data.get("note", "")),
                   tuple((str(n), str(f)) for n, f in data.get("python_dist_folders") or ()))


@dataclass(frozen=True)
class DebPin:
    name: str
    version: str
    arch: str
    filename: str = field(metadata=unkeyed("its path in the archive, where it is downloaded from: its bytes are "
                                           "keyed by sha256"))
    sha256: str
    size: int = field(metadata=unkeyed("follows from its bytes (sha256)"))
    archive: int = field(metadata=unkeyed("which archive it is downloaded from (SystemPin.archives): its bytes are "
                                          "keyed by sha256"))

    def to_json(self) -> JsonDoc:
        return asdict(self)

    @classmethod
    def from_json(cls, data: JsonDoc) -> DebPin:
        return cls(str(data["name"]), str(data["version"]), str(data["arch"]), str(data["filename"]),
                   str(data["sha256"]), int(data["size"]), int(data.get("archive", 0)))


@dataclass(frozen=True)
class SystemPin:
    archives: tuple[str, ...]  # base URLs of the archives, in spec order
    signed: tuple[bool | None, ...]  # whether each archive's InRelease verified (None: no keyring here)
    packages: tuple[DebPin, ...]

    def url(self, deb: DebPin) -> str:
        return f"{self.archives[deb.archive]}/{deb.filename}"

    def to_json(self) -> JsonDoc:
        return {"archives": list(self.archives), "signature_verified": list(self.signed),
                "packages": [p.to_json() for p in self.packages]}

    @classmethod
    def from_json(cls, data: JsonDoc) -> SystemPin:
        archives = tuple(str(a) for a in data["archives"])
        signed = tuple(data.get("signature_verified") or [None] * len(archives))
        return cls(archives, signed, tuple(DebPin.from_json(p) for p in data["packages"]))


@dataclass(frozen=True)
class PyPin:
    """One distribution of a resolved Python closure, and where its file comes from.

    `origin`: index (a wheel or sdist from `index`), url, git (built from `commit`),
    component (a wheel the named component builds), base (the base already ships it)."""

    name: str
    version: str
    origin: str
    filename: str = ""
    url: str = field(default="", metadata=unkeyed("where its file is downloaded from: keyed by sha256"))
    sha256: str = ""
    size: int | None = field(default=None, metadata=unkeyed("follows from its bytes (sha256)"))
    index: str = field(default="", metadata=unkeyed("the index it was found in: its bytes are keyed by sha256"))
    commit: str = ""
    component: str = ""
    requested_by: tuple[str, ...] = field(default=(), metadata=unkeyed(
        "the lock's account of which needs asked for it: not what is installed"))
    # the version the base ships, which this one replaces
    replaces: str = field(default="", metadata=unkeyed("the base's version: the base's files it deletes are "
                                                       "keyed where they are removed (Wheels.removes)"))
    shares: tuple[str, ...] = ()  # distributions of the closure that install the same files (lock/wheelfiles.py)

    def to_json(self) -> JsonDoc:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items() if v not in ("", None, ())}

    @classmethod
    def from_json(cls, data: JsonDoc) -> PyPin:
        return cls(str(data["name"]), str(data.get("version", "")), str(data["origin"]), str(data.get("filename", "")),
                   str(data.get("url", "")), str(data.get("sha256", "")), data.get("size"), str(data.get("index", "")),
                   str(data.get("commit", "")), str(data.get("component", "")),
                   tuple(data.get("requested_by") or ()), str(data.get("replaces", "")),
                   tuple(str(n) for n in data.get("shares") or ()))


@dataclass(frozen=True)
class PythonPin:
    packages: tuple[PyPin, ...]
    base_digest: str | None = None  # the base whose distributions constrained it (None: none was read)
    note: str = ""
    wheel_sources: tuple[tuple[str, str], ...] = ()  # (component, source identity) whose wheel's needs it holds

    def installed(self) -> tuple[PyPin, ...]:
        return tuple(p for p in self.packages if p.origin != "base")

    def to_json(self) -> JsonDoc:
        body: JsonDoc = {"packages": [p.to_json() for p in self.packages], "base_digest": self.base_digest}
        if self.note:
            body["note"] = self.note
        if self.wheel_sources:
            body["wheel_sources"] = [list(p) for p in self.wheel_sources]
        return body

    @classmethod
    def from_json(cls, data: JsonDoc) -> PythonPin:
        return cls(tuple(PyPin.from_json(p) for p in data["packages"]), data.get("base_digest"),
                   str(data.get("note", "")), tuple((str(c), str(i)) for c, i in data.get("wheel_sources") or ()))


@dataclass(frozen=True)
class ToolPin:
    """A tool enginebuild runs on the host (cuobjdump), one wheel per host platform."""

    name: str
    version: str
    files: tuple[tuple[str, PyPin], ...]  # (host machine, wheel)

    def for_machine(self, machine: str) -> PyPin | None:
        return next((f for m, f in self.files if m == machine), None)

    def to_json(self) -> JsonDoc:
        return {"name": self.name, "version": self.version, "files": {m: f.to_json() for m, f in self.files}}

    @classmethod
    def from_json(cls, data: JsonDoc) -> ToolPin:
        return cls(str(data["name"]), str(data["version"]),
                   tuple((m, PyPin.from_json(f)) for m, f in sorted(data["files"].items())))
