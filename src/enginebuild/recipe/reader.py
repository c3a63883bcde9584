"""Reading a validated, merged spec tree: where each key was written, the recipe's files, sources
and patches (the parts every reader of a spec uses)."""

from __future__ import annotations

import difflib
import os
import posixpath
from pathlib import Path, PurePosixPath
from typing import Any

from enginebuild.core.patchfile import HEADER_SUFFIX, PatchError, parse_patch, with_header_file
from enginebuild.core.yamlload import YList, YMap
from enginebuild.errors import SpecError, Where
from enginebuild.io.files import image_mode
from enginebuild.io.recipefiles import read_recipe_file
from enginebuild.recipe import model as m
from enginebuild.recipe.listing import listed
from enginebuild.recipe.model import ENV_REF
from enginebuild.recipe.patchchecks import read_checks
from enginebuild.sources import Source, kind
from enginebuild.sources.base import Place


def env_references(value: str) -> list[str]:
    """The variables a value refers to (`$NAME`, `${NAME}`, `${NAME:-default}`; `$$` is a dollar)."""
    names = []
    for match in ENV_REF.finditer(value):
        name = match.group("braced") or match.group("bare")
        if name:
            names.append(name)
    stray = ENV_REF.sub("", value)
    if "$" in stray:
        raise ValueError("a `$` that starts no variable reference; write `$$` for a literal dollar")
    return names


def places(node: Any, path: str = "") -> dict[str, Where]:
    """Where each key (`a.b`) and list item (`a[0]`) of a merged tree was written."""
    out: dict[str, Where] = {}
    if isinstance(node, YMap):
        for key, value in node.items():
            full = f"{path}.{key}" if path else str(key)
            out[full] = node.at(key)
            out.update(places(value, full))
    elif isinstance(node, YList):
        for i, value in enumerate(node):
            out[f"{path}[{i}]"] = node.at(i)
            out.update(places(value, f"{path}[{i}]"))
    return out


class Reader:
    def __init__(self, root: Path, tree: YMap):
        self.root = root
        self.tree = tree
        # every key where it was written (after merging: a parent's, a variant's or a --set's own
        # place), so a message about one key of a mapping a --set touched names that key's file
        self.wheres: dict[str, Where] = places(tree)
        self.runtime: m.Environment | None = None
        self.named: dict[str, m.Environment] = {}

    # -- locating ------------------------------------------------------------------------
    def get(self, node: Any, key: str, path: str, default: Any = None) -> Any:
        if not isinstance(node, dict) or key not in node or node[key] is None:
            return default
        full = f"{path}.{key}" if path else key
        if isinstance(node, YMap):
            self.wheres[full] = node.at(key)
        return node[key]

    def where(self, path: str) -> Where:
        while path:
            if path in self.wheres:
                return self.wheres[path]
            path = path.rpartition(".")[0]
        return self.tree.where

    def folder(self, path: str) -> Path:
        return (self.root / PurePosixPath(self.where(path).file).parent).resolve()

    def place(self, path: str) -> Place:
        return Place(self.root, self.folder(path), self.where(path))

    def pairs(self, node: Any, path: str) -> tuple[tuple[str, str], ...]:
        out = []
        for key, value in (node or {}).items():
            if value is None:
                continue
            if isinstance(node, YMap):
                self.wheres[f"{path}.{key}"] = node.at(key)
            out.append((key, str(value)))
        return tuple(out)

    def display(self, path: Path) -> str:
        try:
            return str(PurePosixPath(path.relative_to(self.root)))
        except ValueError:
            return str(path)

    def inside_repository(self, real: Path, rel: str, path: str) -> None:
        """Recipe files may live anywhere inside the recipe repository (a shared scripts/ folder
        reached with ..), never outside it, by a path or through a symlink."""
        root = self.root.resolve()
        if real != root and root not in real.parents:
            raise SpecError(self.where(path), path, f"{rel!r} resolves outside the recipe repository (to {real})",
                            hint="files must live inside the recipe repository; copy it in instead of linking to it")

    def local_file(self, rel: str, path: str) -> tuple[Path, str]:
        where, folder = self.where(path), self.folder(path)
        candidate = folder / rel
        self.inside_repository(Path(os.path.normpath(candidate)), rel, path)  # by its words, before the disk
        if not candidate.exists() and not candidate.is_symlink():
            raise SpecError(where, path, f"file not found: {self.display(candidate)}",
                            hint=_did_you_mean(rel, candidate.parent, "*"))
        real = candidate.resolve()
        self.inside_repository(real, rel, path)
        if not real.is_file():
            raise SpecError(where, path, f"expected a regular file: {rel}")
        return real, self.display(Path(os.path.normpath(candidate)))

    # -- files -----------------------------------------------------------------------------
    def file_group(self, dest: str, entry: Any, path: str) -> m.FileGroup:
        where = self.where(path)
        mode_text = entry.get("mode") if isinstance(entry, dict) else None
        forced = int(mode_text, 8) if mode_text else None
        if isinstance(entry, dict) and "url" in entry:
            name = dest if not dest.endswith("/") else dest + entry["url"].rstrip("/").rsplit("/", 1)[-1]
            return m.FileGroup(dest, (m.FileEntry(name, forced or 0o644, entry["url"], url=entry["url"],
                                                  sha256=entry["sha256"]),), where)
        rel = entry["src"] if isinstance(entry, dict) else entry
        src_path = f"{path}.src" if isinstance(entry, dict) else path
        folder = self.folder(src_path)
        fixed = rel.split("*")[0].split("?")[0]  # what a glob cannot change: checked by its words, before any listing
        self.inside_repository(Path(os.path.normpath(folder / fixed)) if fixed else folder, rel, src_path)
        if any(c in rel for c in "*?"):
            if not dest.endswith("/"):
                raise SpecError(where, path, f"a glob ({rel}) copies several files: end the destination with /")
            matches = listed("glob", folder, rel)
            if not matches:
                raise SpecError(where, path, f"{rel!r} matches no file in {self.display(folder)}")
            entries = [self._entry(dest + p.name, p, forced, src_path) for p in matches]
            return m.FileGroup(dest, tuple(entries), where, ("glob", str(folder), rel))
        candidate = folder / rel.rstrip("/")
        if candidate.is_dir():
            real = candidate.resolve()
            self.inside_repository(real, rel, path)
            base = dest.rstrip("/")
            entries = [self._entry(f"{base}/{p.relative_to(candidate).as_posix()}", p, forced, src_path)
                       for p in listed("folder", candidate, "")]
            if not entries:
                raise SpecError(where, path, f"folder {rel!r} is empty")
            return m.FileGroup(dest, tuple(entries), where, ("folder", str(candidate), ""))
        src, display = self.local_file(rel, src_path)
        name = dest + candidate.name if dest.endswith("/") else dest
        mode = forced if forced is not None else image_mode(src.stat().st_mode)
        return m.FileGroup(dest, (m.FileEntry(name, mode, display, src=src, mode_given=forced is not None),), where)

    def _entry(self, dest: str, path: Path, forced: int | None, spec_path: str) -> m.FileEntry:
        real, display = self.local_file(os.path.relpath(path, self.folder(spec_path)), spec_path)
        mode = forced if forced is not None else image_mode(real.stat().st_mode)
        return m.FileEntry(dest, mode, display, src=real, mode_given=forced is not None)

    def files(self, node: Any, path: str) -> tuple[m.FileGroup, ...]:
        out = []
        for dest in sorted(node or {}):
            entry = self.get(node, dest, path)
            if entry is not None:
                out.append(self.file_group(dest, entry, f"{path}.{dest}"))
        seen: dict[str, str] = {}
        for group in out:
            for entry in group.entries:
                if entry.dest in seen:
                    raise SpecError(group.where, f"{path}.{group.key}",
                                    f"{entry.dest} is also written by files.{seen[entry.dest]}")
                seen[entry.dest] = group.key
        return tuple(out)

    # -- sources and patches -------------------------------------------------------------
    def source(self, node: Any, path: str, default_name: str) -> Source:
        (name, value), = [(k, v) for k, v in node.items() if v is not None]
        sub = f"{path}.{name}"
        self.get(node, name, path)
        impl = kind(name)
        try:
            request = impl.request(value, self.place(sub), default_name)
        except SpecError as exc:
            raise SpecError(self.where(sub), sub, exc.message.split(": ", 1)[-1], hint=exc.hint) from None
        return Source(name, request, self.where(sub))

    def patches(self, names: Any, path: str) -> tuple[m.PatchRef, ...]:
        out = []
        patch_root = (self.root / "patches").resolve()
        for i, name in enumerate(names or ()):
            sub = f"{path}[{i}]"
            where = names.at(i) if isinstance(names, YList) else self.where(path)
            self.wheres[sub] = where
            candidate = patch_root / name
            if not candidate.exists():
                raise SpecError(where, sub, f"patch not found: patches/{name}",
                                hint=_did_you_mean(name, patch_root, "**/*.patch", "**/*.diff"))
            real = candidate.resolve()
            if patch_root not in real.parents or not real.is_file():
                raise SpecError(where, sub, f"patches/{name} must be a regular file inside patches/")
            try:
                parsed = parse_patch(name, read_recipe_file(real, str(self.root)))
                sidecar = real.with_name(real.name + HEADER_SUFFIX)
                if sidecar.is_file():
                    parsed = with_header_file(parsed, f"{name}{HEADER_SUFFIX}",
                                              read_recipe_file(sidecar, str(self.root)))
            except PatchError as exc:
                raise SpecError(where, sub, exc.message) from None
            checks = read_checks(real, name, self.root)  # its own file's errors name that file
            out.append(m.PatchRef(name=name, path=real, where=where, patch=parsed, checks=checks))
        return tuple(out)


def _did_you_mean(rel: str, folder: Path, *patterns: str) -> str | None:
    """"did you mean X?" for a missing file: among the files of `folder` that `patterns` match (by
    their path under it: patches/), or among its own folder's files (`*`: by the name)."""
    if not folder.is_dir():
        return None
    by_path = patterns[0].startswith("**")
    names = sorted({str(p.relative_to(folder)) for pattern in patterns for p in folder.glob(pattern) if p.is_file()})
    close = difflib.get_close_matches(rel if by_path else posixpath.basename(rel), names, n=1)
    if not close:
        return None
    return f"did you mean {close[0] if by_path else posixpath.join(posixpath.dirname(rel), close[0])!r}?"
