"""`pypi: {name, version, index}`: a source distribution from a Python package index."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from enginebuild.core.schema import Record, Str
from enginebuild.errors import ResolveError, UserError
from enginebuild.io.store import Blob, sha256_bytes
from enginebuild.io.unpack import parse_size, size_problem
from enginebuild.sources.base import DEFAULT_INDEX, Context, Kind, Place
from enginebuild.sources.pyindex import find_file, newest_version, project_files, version_of_file
from enginebuild.sources.trees import ArchiveTree, SourceTree, archive_to_tree
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    from enginebuild.io.git import Mirrors


def _version(value: str) -> str | None:
    try:
        Version(value)
    except InvalidVersion:
        return f"expected a version such as 0.21.0, got {value!r}"
    return None


def _index(value: str) -> str | None:
    if not re.fullmatch(r"https?://[A-Za-z0-9.:\[\]-]+(?:/[A-Za-z0-9._~%/+-]*)?", value):
        return f"expected an http(s) URL of a package index, got {value!r}"
    return None


def _sortable(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


@dataclass(frozen=True)
class PypiRequest:
    name: str
    version: str
    index: str
    max_unpacked: int | None = None  # what the sdist may expand to (io/unpack.py); not part of the pin


@dataclass(frozen=True)
class PypiPin:
    name: str
    version: str
    filename: str
    url: str
    sha256: str
    size: int | None
    index: str


SDIST_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")


class PypiKind:
    name = "pypi"
    doc = "`{name, version, index}`: the sdist of that release (name defaults to the component's)"
    schema = Record({"name": Str(pattern=r"[A-Za-z0-9][A-Za-z0-9._-]*", what="a project name"),
                     "version": Str(test=_version, what="a version"),
                     "index": Str(test=_index, what="an index URL"),
                     "max-unpacked": Str(test=size_problem, what="a size", allow_int=True,
                                         description="what the sdist may unpack to (default: 100x its size, "
                                                     "at least 1 GiB)")},
                    required=("version",), doc="{name, version, index, max-unpacked}")

    def request(self, node: JsonDoc, place: Place, default_name: str) -> PypiRequest:
        limit = node.get("max-unpacked")
        return PypiRequest(str(node.get("name") or default_name), str(node["version"]),
                           str(node.get("index") or DEFAULT_INDEX).rstrip("/"),
                           parse_size(limit) if limit is not None else None)

    def request_json(self, request: PypiRequest) -> JsonDoc:
        body = {"name": request.name, "version": request.version}
        if request.index != DEFAULT_INDEX:
            body["index"] = request.index
        return body

    def resolve(self, request: PypiRequest, ctx: Context) -> PypiPin:
        files = project_files(ctx.http, request.index, request.name)
        for f in files:
            text = version_of_file(request.name, f.filename)
            # a release is named exactly: 0.24 is not 0.24.0
            if text == request.version and not f.yanked and f.filename.endswith(SDIST_SUFFIXES):
                return PypiPin(canonicalize_name(request.name), request.version, f.filename, f.url, f.sha256,
                               f.size, request.index)
        known = sorted({v for f in files if (v := version_of_file(request.name, f.filename))}, key=_sortable)[-5:]
        raise ResolveError(f"{request.index} has no source distribution of {request.name}=={request.version}",
                           hint=f"recent releases: {', '.join(known)}" if known else None)

    def pin_json(self, pin: PypiPin) -> JsonDoc:
        return asdict(pin)

    def pin_from_json(self, data: JsonDoc) -> PypiPin:
        return PypiPin(str(data["name"]), str(data["version"]), str(data["filename"]), str(data["url"]),
                       str(data["sha256"]), data.get("size"), str(data.get("index") or DEFAULT_INDEX))

    def identity(self, request: PypiRequest, pin: PypiPin, only: Callable[[str], bool] | None = None) -> str:
        return sha256_bytes(f"pypi {pin.sha256}".encode())

    def describe(self, request: PypiRequest, pin: PypiPin | None) -> str:
        text = f"pypi {request.name}=={request.version}"
        return text + (f" (sdist sha256 {pin.sha256[:12]})" if pin else "")

    def origin(self, pin: PypiPin) -> tuple[str, str, str]:
        return "", pin.version, ""

    def version(self, request: PypiRequest, pin: PypiPin | None) -> str | None:
        return request.version

    def _archive(self, pin: PypiPin, ctx: Context) -> Path:
        return ctx.store.fetch(ctx.http, [pin.url], pin.sha256, pin.filename, pin.size,
                               alternatives=lambda: find_file(ctx.http, pin.index, pin.name, pin.filename, pin.sha256))

    def tree(self, request: PypiRequest, pin: PypiPin, ctx: Context) -> SourceTree:
        return ArchiveTree(self._archive(pin, ctx), pin.sha256, ctx.home,
                           f"{pin.version} (sdist {pin.filename}, sha256 {pin.sha256[:12]})", version=pin.version,
                           max_unpacked=request.max_unpacked)

    def tree_tar(self, request: PypiRequest, pin: PypiPin, ctx: Context) -> Blob:
        return ctx.store.derived("trees", sha256_bytes(f"sdist-tree-v1 {pin.sha256} {ctx.mtime}".encode()),
                                 f"tree of {pin.filename}",
                                 lambda: archive_to_tree(ctx.store, self._archive(pin, ctx), pin.filename, ctx.mtime,
                                                        max_unpacked=request.max_unpacked))

    def fetched_from(self, request: PypiRequest, mirrors: Mirrors) -> str | None:
        return None

    def watched_paths(self, request: PypiRequest) -> list[Path]:
        return []

    def downloads(self, pin: PypiPin) -> list[tuple[str, list[str], str, int | None]]:
        return [(pin.sha256, [pin.url], pin.filename, pin.size)]

    def project(self, request: PypiRequest) -> tuple[str, ...]:
        return ("pypi", request.index, request.name.lower().replace("_", "-"))

    def override(self, request: PypiRequest, ref: str, ctx: Context) -> tuple[PypiRequest, PypiPin]:
        version = ref
        if ref == "latest":
            found = newest_version(project_files(ctx.http, request.index, request.name), request.name)
            if not found:
                raise UserError(f"--engine latest: {request.index} lists no release of {request.name}")
            version = found
        elif _version(ref):
            raise UserError(f"--engine {ref!r}: {request.name} comes from an index; give a release version such as "
                            f"0.22.0 (or `latest`)")
        moved = replace(request, version=version)
        return moved, self.resolve(moved, ctx)


KIND: Kind[PypiRequest, PypiPin] = PypiKind()
