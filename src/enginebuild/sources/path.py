"""`path: DIR`: a folder beside the spec. Nothing to lock: its bytes are its identity."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from enginebuild.core.schema import Str
from enginebuild.errors import SpecError, UserError
from enginebuild.io.store import Blob
from enginebuild.io.tars import walk_folder
from enginebuild.sources.base import Context, Kind, Place
from enginebuild.sources.trees import DirTree, SourceTree, folder_to_tree
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    from enginebuild.io.git import Mirrors


def _rel(value: str) -> str | None:
    if value.startswith("/") or "\\" in value or any(c in value for c in "\n\r\x00"):
        return f"expected a folder relative to the spec's folder, got {value!r}"
    if any(part == ".." for part in value.split("/")):
        return f"'..' is not allowed: sources must live inside the image folder, got {value!r}"
    return None


@dataclass(frozen=True)
class PathRequest:
    path: Path
    display: str


def folder_digest(folder: Path, only: Callable[[str], bool] | None = None) -> str:
    """The bytes, names, modes and links of a folder (of its files and links that `only` takes,
    when given: a component's declared inputs), as one digest."""
    digest = hashlib.sha256()
    for entry in walk_folder(folder):
        if only is not None and (entry.kind == "dir" or not only(entry.rel)):
            continue
        digest.update(f"{entry.kind} {entry.rel} {entry.mode:o} {entry.target}\n".encode())
        if entry.kind == "file":
            with open(entry.path, "rb") as handle:
                while block := handle.read(1 << 20):
                    digest.update(block)
    return digest.hexdigest()


class PathKind:
    name = "path"
    doc = "`DIR`: a folder beside the spec (no lock entry; its content is its identity)"
    schema = Str(test=_rel, what="a folder beside the spec")

    def request(self, node: Any, place: Place, default_name: str) -> PathRequest:
        rel = str(node)
        candidate = place.folder / rel
        real = candidate.resolve()
        folder = place.folder.resolve()
        if not candidate.exists():
            raise SpecError(place.where, "", f"folder not found: {_display(place.root, candidate)}")
        if real != folder and folder not in real.parents:
            raise SpecError(place.where, "", f"{rel!r} resolves outside the image folder (to {real})")
        if not real.is_dir():
            raise SpecError(place.where, "", f"expected a directory: {rel}")
        return PathRequest(real, _display(place.root, candidate))

    def request_json(self, request: PathRequest) -> None:
        return None

    def resolve(self, request: PathRequest, ctx: Context) -> None:
        return None

    def pin_json(self, pin: None) -> JsonDoc:
        return {}

    def pin_from_json(self, data: JsonDoc) -> None:
        return None

    def identity(self, request: PathRequest, pin: None, only: Callable[[str], bool] | None = None) -> str:
        return folder_digest(request.path, only)

    def describe(self, request: PathRequest, pin: None) -> str:
        return f"folder {request.display}"

    def origin(self, pin: None) -> tuple[str, str, str]:
        return "", "", ""

    def version(self, request: PathRequest, pin: None) -> str | None:
        return None

    def tree(self, request: PathRequest, pin: None, ctx: Context) -> SourceTree:
        return DirTree(request.path, f"folder {request.display}")

    def tree_tar(self, request: PathRequest, pin: None, ctx: Context) -> Blob:
        return folder_to_tree(ctx.store, request.path, request.display, ctx.mtime)

    def fetched_from(self, request: PathRequest, mirrors: Mirrors) -> str | None:
        return None

    def watched_paths(self, request: PathRequest) -> list[Path]:
        paths = [request.path]
        paths += [e.path for e in walk_folder(request.path)]
        return paths

    def downloads(self, pin: None) -> list[tuple[str, list[str], str, int | None]]:
        return []

    def project(self, request: PathRequest) -> tuple[str, ...]:
        return ("path", request.display)

    def override(self, request: PathRequest, ref: str, ctx: Context) -> tuple[PathRequest, None]:
        raise UserError(f"--engine: the source is a folder of this repository ({request.display}); "
                        "there is no other version to check against")


def _display(root: Path, path: Path) -> str:
    try:
        return str(PurePosixPath(path.relative_to(root)))
    except ValueError:
        return str(path)


KIND: Kind[PathRequest, None] = PathKind()
