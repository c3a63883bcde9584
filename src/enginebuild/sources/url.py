"""`url: {url, sha256}`: a file from a URL, pinned by its sha256 (a tarball is unpacked;
any other file is taken as it is, under its file name)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from enginebuild.io.git import Mirrors
    from enginebuild.io.store import HashingWriter

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from enginebuild.core.schema import Bool, Record, Str
from enginebuild.errors import ResolveError, UserError
from enginebuild.io.store import Blob, make_blob, sha256_bytes
from enginebuild.io.tars import TarWriter
from enginebuild.io.unpack import parse_size, size_problem
from enginebuild.sources.base import Context, Kind, Place
from enginebuild.sources.trees import ArchiveTree, SourceTree, archive_to_tree
from enginebuild.wire import JsonDoc

ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")


def _url(value: str) -> str | None:
    if not re.fullmatch(r"https?://[A-Za-z0-9.:\[\]@-]+(?:/[A-Za-z0-9._~%/+=,:@!$&'()*;-]*)?(?:\?[^\s#]*)?", value):
        return f"expected an http(s) URL, got {value!r}"
    return None


@dataclass(frozen=True)
class UrlRequest:
    url: str
    sha256: str | None
    unpack: bool
    max_unpacked: int | None = None  # what a tarball may expand to (io/unpack.py); not part of the pin

    @property
    def filename(self) -> str:
        return urlsplit(self.url).path.rsplit("/", 1)[-1] or "download"


@dataclass(frozen=True)
class UrlPin:
    url: str
    sha256: str
    size: int


class UrlKind:
    name = "url"
    doc = ("`{url, sha256, unpack, max-unpacked}`: a file pinned by sha256 (a tarball is unpacked unless "
           "`unpack: false`)")
    schema = Record({"url": Str(test=_url, what="an http(s) URL"),
                     "sha256": Str(pattern=r"[0-9a-f]{64}", what="a sha256 (64 lower-case hex digits)"),
                     "unpack": Bool(),
                     "max-unpacked": Str(test=size_problem, what="a size", allow_int=True,
                                         description="what the tarball may unpack to (default: 100x its size, "
                                                     "at least 1 GiB)")},
                    required=("url",), doc="{url, sha256, unpack, max-unpacked}")

    def request(self, node: JsonDoc, place: Place, default_name: str) -> UrlRequest:
        url = str(node["url"])
        unpack = bool(node.get("unpack", url.endswith(ARCHIVES)))
        limit = node.get("max-unpacked")
        return UrlRequest(url, node.get("sha256"), unpack, parse_size(limit) if limit is not None else None)

    def request_json(self, request: UrlRequest) -> JsonDoc:
        body: JsonDoc = {"url": request.url, "unpack": request.unpack}
        if request.sha256:
            body["sha256"] = request.sha256
        return body

    def resolve(self, request: UrlRequest, ctx: Context) -> UrlPin:
        if request.sha256:
            path = ctx.store.fetch(ctx.http, [request.url], request.sha256, request.filename)
            return UrlPin(request.url, request.sha256, path.stat().st_size)
        response = ctx.http.request("GET", request.url)
        if response.status_code != 200:
            raise ResolveError(f"{request.url} answered HTTP {response.status_code}")
        blob = ctx.store.put_bytes(response.content, request.filename)
        return UrlPin(request.url, blob.sha256, blob.size)

    def pin_json(self, pin: UrlPin) -> JsonDoc:
        return {"url": pin.url, "sha256": pin.sha256, "size": pin.size}

    def pin_from_json(self, data: JsonDoc) -> UrlPin:
        return UrlPin(str(data["url"]), str(data["sha256"]), int(data.get("size") or 0))

    def identity(self, request: UrlRequest, pin: UrlPin, only: Callable[[str], bool] | None = None) -> str:
        return sha256_bytes(f"url {pin.sha256} {request.unpack} {request.filename}".encode())

    def describe(self, request: UrlRequest, pin: UrlPin | None) -> str:
        return f"{request.url}" + (f" (sha256 {pin.sha256[:12]})" if pin else "")

    def origin(self, pin: UrlPin) -> tuple[str, str, str]:
        return "", "", ""

    def version(self, request: UrlRequest, pin: UrlPin | None) -> str | None:
        return None

    def _file(self, pin: UrlPin, ctx: Context, request: UrlRequest) -> Path:
        return ctx.store.fetch(ctx.http, [pin.url], pin.sha256, request.filename, pin.size)

    def tree(self, request: UrlRequest, pin: UrlPin, ctx: Context) -> SourceTree:
        if not request.unpack:
            raise UserError(f"{request.url}: a single file has no tree to patch; give a tarball")
        return ArchiveTree(self._file(pin, ctx, request), pin.sha256, ctx.home, f"{request.filename}",
                           max_unpacked=request.max_unpacked)

    def tree_tar(self, request: UrlRequest, pin: UrlPin, ctx: Context) -> Blob:
        key = self.identity(request, pin) + f" {ctx.mtime}"
        if request.unpack:
            return ctx.store.derived("trees", sha256_bytes(key.encode()), request.filename,
                                     lambda: archive_to_tree(ctx.store, self._file(pin, ctx, request),
                                                             request.filename, ctx.mtime,
                                                             max_unpacked=request.max_unpacked))
        path = self._file(pin, ctx, request)

        def write(sink: HashingWriter) -> None:
            writer = TarWriter(sink, mtime=ctx.mtime)
            with open(path, "rb") as handle:
                writer.add_stream(request.filename, handle, path.stat().st_size)
            writer.close()

        return ctx.store.derived("trees", sha256_bytes(key.encode()), request.filename,
                                 lambda: make_blob(ctx.store, request.filename, write))

    def fetched_from(self, request: UrlRequest, mirrors: Mirrors) -> str | None:
        return None

    def watched_paths(self, request: UrlRequest) -> list[Path]:
        return []

    def downloads(self, pin: UrlPin) -> list[tuple[str, list[str], str, int | None]]:
        return [(pin.sha256, [pin.url], pin.url.rsplit("/", 1)[-1], pin.size)]

    def project(self, request: UrlRequest) -> tuple[str, ...]:
        return ("url", request.url.rstrip("/").lower())

    def override(self, request: UrlRequest, ref: str, ctx: Context) -> tuple[UrlRequest, UrlPin]:
        raise UserError(f"--engine: {request.url} is one pinned file; there is no other version to check against")


KIND: Kind[UrlRequest, UrlPin] = UrlKind()
