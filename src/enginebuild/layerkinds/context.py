"""What a BuildKit build context is made of: its items and where each item's bytes come from."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.core.keys import unkeyed
from enginebuild.recipe.model import PatchRef
from enginebuild.sources import Pinned


@dataclass(frozen=True)
class FromData:
    data: bytes = field(repr=False)

@dataclass(frozen=True)
class FromFile:
    path: Path

@dataclass(frozen=True)
class FromBlob:
    """A fetched artifact in the store, by sha256 (a .deb, a wheel)."""

    sha256: str
    what: str
    urls: tuple[str, ...] = ()
    size: int | None = None

@dataclass(frozen=True)
class FromSource:
    """A source's whole tree, with its patch stack applied on the host."""

    source: Pinned
    patches: tuple[PatchRef, ...]
    only: tuple[str, ...] = ()  # declared inputs (globs): the tree holds only those

@dataclass(frozen=True)
class FromOutput:
    """What a component built (its exported outputs)."""

    component: str
    key: str

Origin = FromData | FromFile | FromBlob | FromSource | FromOutput

@dataclass(frozen=True)
class ContextItem:
    """One file of a BuildKit build context; `digest` is its identity in keys."""

    arcname: str
    digest: str
    origin: Origin = field(compare=False, metadata=unkeyed("where its bytes come from: keyed by digest"))
    mode: int = 0o644
    # what a user calls it, for "what changed"
    label: str = field(default="", compare=False, metadata=unkeyed("for messages"))
