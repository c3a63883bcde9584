"""Source kinds: where a component's code comes from (git, an sdist on PyPI, a folder of this
repository, a URL pinned by sha256). One module per kind, each defining `KIND`; see base.py."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from enginebuild.errors import Where
from enginebuild.sources.base import Context, Kind
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    from enginebuild.io.git import Mirrors
    from enginebuild.io.store import Blob
    from enginebuild.sources.trees import SourceTree

SomeKind = Kind[Any, Any]  # a source kind, whatever its request and pin types: only the kind reads them


@lru_cache(maxsize=1)
def kinds() -> dict[str, SomeKind]:
    found: dict[str, SomeKind] = {}
    for module in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{module.name}")
        kind = getattr(mod, "KIND", None)
        if kind is not None:
            found[kind.name] = kind
    return dict(sorted(found.items()))


def kind(name: str) -> SomeKind:
    return kinds()[name]


class PinLookup(Protocol):
    """The lock's pins by input name (a mapping, or plan's `Pins`, which refuses what is unpinned)."""

    def get(self, name: str, /) -> object: ...


@dataclass(frozen=True)
class Source:
    """A source as the spec asks for it: its kind and the kind's typed request. Only its kind reads
    the request; the rest of enginebuild asks the source, and holds a pin as `Pinned`."""

    kind: str
    request: object  # the kind's own request type (GitRequest, PypiRequest, ...)
    where: Where

    @property
    def _impl(self) -> SomeKind:
        return kind(self.kind)

    @property
    def pinned_by_lock(self) -> bool:
        return self._impl.request_json(self.request) is not None

    def request_json(self) -> JsonDoc | None:
        body = self._impl.request_json(self.request)
        return None if body is None else {"kind": self.kind, **body}

    def describe(self) -> str:
        return self._impl.describe(self.request, None)

    @property
    def release(self) -> str | None:
        """The release version the spec names (a git request's `version`), if any."""
        version = getattr(self.request, "version", None)
        return version if isinstance(version, str) else None

    def watched_paths(self) -> list[Path]:
        return self._impl.watched_paths(self.request)

    def fetched_from(self, mirrors: Mirrors) -> str | None:
        """Where it is fetched from instead of its own address (a git mirror), if anywhere."""
        return self._impl.fetched_from(self.request, mirrors)

    def resolve(self, ctx: Context) -> Pinned:
        return Pinned(self, self._impl.resolve(self.request, ctx))

    def project(self) -> tuple[str, ...]:
        """What it is a version of (an index's project, a repository)."""
        return self._impl.project(self.request)

    def override(self, ref: str, ctx: Context) -> Pinned:
        """Another version or ref of the same source (`patches check --engine`)."""
        request, pin = self._impl.override(self.request, ref, ctx)
        return Pinned(replace(self, request=request), pin)

    def pin_from_json(self, data: JsonDoc) -> Pinned:
        """The lock's `resolved` document, read through the kind's wire type into its pin."""
        return Pinned(self, self._impl.pin_from_json(data))

    def at(self, pins: PinLookup, name: str) -> Pinned:
        """This source as the lock's pins (by input name) pin it; unpinned where the lock has
        no pin for it yet or nothing pins it (a folder of this repository)."""
        found = pins.get(name) if self.pinned_by_lock else None
        return found if isinstance(found, Pinned) else Pinned(self, None)


@dataclass(frozen=True)
class Pinned:
    """A source with its pin, which only the source's kind reads (a full commit, an sdist's file and
    sha256, ...); `pin` None: unpinned (a folder nothing pins, or `render --unpinned`). What plan,
    build, fetch and patch checks hold: the pin is never handed around on its own."""

    source: Source
    pin: object | None

    @property
    def _impl(self) -> SomeKind:
        return kind(self.source.kind)

    @property
    def complete(self) -> bool:
        """Whether its bytes are known: pinned, or a source nothing pins."""
        return self.pin is not None or not self.source.pinned_by_lock

    def to_json(self) -> JsonDoc:
        return self._impl.pin_json(self.pin)

    def identity(self, only: Callable[[str], bool] | None = None) -> str:
        return self._impl.identity(self.source.request, self.pin, only)

    def describe(self) -> str:
        return self._impl.describe(self.source.request, self.pin)

    def version(self) -> str | None:
        return self._impl.version(self.source.request, self.pin)

    def origin(self) -> tuple[str, str, str]:
        """(commit, release version, repository URL) for the image's labels; empty when unpinned."""
        return self._impl.origin(self.pin) if self.pin is not None else ("", "", "")

    def tree(self, ctx: Context) -> SourceTree:
        return self._impl.tree(self.source.request, self.pin, ctx)

    def tree_tar(self, ctx: Context) -> Blob:
        return self._impl.tree_tar(self.source.request, self.pin, ctx)

    def downloads(self) -> list[tuple[str, list[str], str, int | None]]:
        return self._impl.downloads(self.pin)
