"""The protocol every source kind implements, and what kinds are given to work with.

A kind is one module of this package defining `KIND`. Adding a kind is adding a module:
the spec schema, the lock, planning, fetching and `patches check` find it here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from enginebuild.errors import Where
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    from enginebuild.core.schema import Schema
    from enginebuild.io.git import Mirrors
    from enginebuild.io.http import Http
    from enginebuild.io.store import Blob, Store
    from enginebuild.sources.trees import SourceTree

DEFAULT_INDEX = "https://pypi.org/simple"  # where a Python requirement is resolved unless the spec says



@dataclass(frozen=True)
class Place:
    """Where a source was written: the checkout, the spec's folder, its file:line."""

    root: Path
    folder: Path
    where: Where


@dataclass
class Context:
    """What resolving and materialising sources may use: the store, mirrors, one HTTP session."""

    home: Path
    http: Http = field(default_factory=lambda: _http())  # io.http loads only when a source needs it
    mtime: int = 0  # time stamp of every entry of a tree written from a source
    mirrors: Mirrors = ()  # where git sources are fetched from instead: the checkout's enginebuild.yaml

    @property
    def store(self) -> Store:
        from enginebuild.io.store import Store

        return Store(self.home)


Request = TypeVar("Request")
Pin = TypeVar("Pin")


class Kind(Protocol[Request, Pin]):
    """A source kind over its own request and pin types; each module declares `KIND: Kind[ItsRequest,
    ItsPin]`, so mypy holds the module to this protocol with those types."""

    name: str  # the key in a spec: git, pypi, path, url
    doc: str  # one line for docs/spec.md

    @property
    def schema(self) -> Schema:
        """What `source:` of this kind takes (a kind keeps a narrower schema type: read-only here)."""

    def request(self, node: JsonDoc, place: Place, default_name: str) -> Request:
        """The typed request of a validated spec node (checked: paths exist and stay inside)."""

    def request_json(self, request: Request) -> JsonDoc | None:
        """What the lock records as the request (None: nothing to pin, such as a folder)."""

    def resolve(self, request: Request, ctx: Context) -> Pin:
        """The pin of a request: a full commit, an sdist's file and sha256, ..."""

    def pin_json(self, pin: Pin) -> JsonDoc: ...

    def pin_from_json(self, data: JsonDoc) -> Pin: ...

    def identity(self, request: Request, pin: Pin, only: Callable[[str], bool] | None = None) -> str:
        """A digest that changes exactly when the source's bytes may: part of every key using it.
        `only` (a component's declared inputs): a kind that has the files at hand digests those
        alone; a pinned archive or commit stays its pin (its globs and patches are keyed beside)."""

    def describe(self, request: Request, pin: Pin | None) -> str: ...

    def version(self, request: Request, pin: Pin | None) -> str | None:
        """A release version, where the source is one (for Fixed-In and `--engine`)."""

    def origin(self, pin: Pin) -> tuple[str, str, str]:
        """(commit, release version, repository URL) the image's OCI labels name, "" where none."""

    def tree(self, request: Request, pin: Pin, ctx: Context) -> SourceTree:
        """The source's files, readable without unpacking all of them (for patch checks)."""

    def tree_tar(self, request: Request, pin: Pin, ctx: Context) -> Blob:
        """The whole source as a normalised tar (paths relative to its root), in the store."""

    def watched_paths(self, request: Request) -> list[Path]:
        """Files whose change changes the source without a lock change (folders of the repo)."""

    def downloads(self, pin: Pin) -> list[tuple[str, list[str], str, int | None]]:
        """(sha256, urls, what, size) of every file `fetch` must bring into the store."""

    def project(self, request: Request) -> tuple[str, ...]:
        """What the source is a version of (an index's project, a repository): `--engine` moves the
        patch stacks on one project together."""

    def fetched_from(self, request: Request, mirrors: Mirrors) -> str | None:
        """Where the source is fetched from instead of its own address (a git mirror of
        ENGINEBUILD_GIT_MIRRORS or `mirrors`), if anywhere."""

    def override(self, request: Request, ref: str, ctx: Context) -> tuple[Request, Pin]:
        """Another version or ref of the same source, as a request and its pin (`patches check
        --engine`)."""


def _http() -> Http:
    from enginebuild.io.http import Http

    return Http()
