"""The bytes of build-context items: each is checked against the digest the plan used."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from enginebuild.errors import EngineBuildError, FetchError
from enginebuild.io.recipefiles import read_recipe_file
from enginebuild.io.store import Store, sha256_bytes
from enginebuild.io.tars import TarWriter
from enginebuild.layerkinds.context import ContextItem, FromBlob, FromData, FromFile, FromOutput, FromSource
from enginebuild.patches.patched import patched_tree
from enginebuild.sources.base import Context


@dataclass
class Materializer:
    ctx: Context
    image: str
    outputs: dict[str, str] = field(default_factory=dict)  # component key -> sha256 of its output tar

    @property
    def store(self) -> Store:
        return self.ctx.store

    def content(self, item: ContextItem) -> bytes | Path:
        origin = item.origin
        if isinstance(origin, FromData):
            return origin.data
        if isinstance(origin, FromFile):
            data = read_recipe_file(origin.path)
            if sha256_bytes(data) != item.digest:
                raise EngineBuildError(f"{origin.path} changed while enginebuild was running; run the command again")
            return data
        if isinstance(origin, FromBlob):
            return self.store.verified(origin.sha256, origin.what)
        if isinstance(origin, FromSource):
            blob = patched_tree(self.ctx, item.label or item.arcname, origin.source, origin.patches,
                                item.digest, self.image, origin.only)
            return self.store.verified(blob.sha256, f"source tree {item.label}")
        if isinstance(origin, FromOutput):
            sha = self.outputs.get(origin.key)
            if sha is None:
                raise FetchError(f"the outputs of component {origin.component} are not built yet")
            return self.store.verified(sha, f"outputs of {origin.component}")
        raise EngineBuildError(f"context item {item.arcname} has no content")

    def write_context(self, out: IO[bytes], dockerfile: str, items: tuple[ContextItem, ...],
                      extra: list[tuple[str, Path]] | None = None) -> None:
        """The build context; `extra` files (a compiler cache's seed) are not part of any key."""
        writer = TarWriter(out, implied_dirs=True)
        writer.add_bytes("Dockerfile", dockerfile.encode())
        for item in sorted(items, key=lambda i: i.arcname):
            content = self.content(item)
            if isinstance(content, bytes):
                writer.add_bytes(item.arcname, content, item.mode)
            else:
                writer.add_file(item.arcname, content, item.mode)
        for arcname, path in extra or ():
            writer.add_file(arcname, path, 0o644)
        writer.close()
