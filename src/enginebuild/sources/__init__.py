"""Source kinds: where a component's code comes from (git, an sdist on PyPI, a folder of this
repository, a URL pinned by sha256). One module per kind, each defining `KIND`; see base.py."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from enginebuild.errors import Where
from enginebuild.sources.base import Kind
from enginebuild.wire import JsonDoc


@lru_cache(maxsize=1)
def kinds() -> dict[str, Kind[Any, Any]]:
    found: dict[str, Kind[Any, Any]] = {}
    for module in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{module.name}")
        kind = getattr(mod, "KIND", None)
        if kind is not None:
            found[kind.name] = kind
    return dict(sorted(found.items()))


def kind(name: str) -> Kind[Any, Any]:
    return kinds()[name]


@dataclass(frozen=True)
class Source:
    """A source as the spec asks for it: its kind and the kind's typed request."""

    kind: str
    request: Any
    where: Where

    @property
    def impl(self) -> Kind[Any, Any]:
        return kind(self.kind)

    @property
    def pinned_by_lock(self) -> bool:
        return self.impl.request_json(self.request) is not None

    def request_json(self) -> JsonDoc | None:
        body = self.impl.request_json(self.request)
        return None if body is None else {"kind": self.kind, **body}

    def describe(self, pin: Any | None = None) -> str:
        return self.impl.describe(self.request, pin)
