"""Upstream source trees, read without a full checkout, and written out as normalised tars.

- an sdist (or any tar archive) from the store: one pass indexes every member and extracts
  only the files a patch stack touches, into a cache keyed by the archive's sha256;
- a git commit in a bare mirror: `git ls-tree` and `git cat-file`, no work tree;
- a folder of the repository.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterable
from pathlib import Path

from enginebuild.errors import FetchError
from enginebuild.io.files import image_mode, mutex, write_atomic
from enginebuild.io.git import Mirror, git
from enginebuild.io.progress import output
from enginebuild.io.store import Blob, Store, make_blob, sha256_bytes
from enginebuild.io.tarrules import clean_name
from enginebuild.io.tars import TarWriter, write_folder
from enginebuild.io.unpack import Budget, is_disk_full

FILE, DIR, SYMLINK, OTHER = "file", "dir", "symlink", "other"


class SourceTree:
    description = ""
    version: str | None = None  # a release version, where the tree is one
    commit: str | None = None

    def kind(self, path: str) -> str | None:
        raise NotImplementedError

    def read_many(self, paths: Iterable[str]) -> dict[str, bytes | None]:
        raise NotImplementedError

    def mode(self, path: str) -> int:
        return 0o644

    def listing(self) -> list[str] | None:
        """Every regular file's path, where the tree can list them without reading them (None:
        it cannot)."""
        return None

    def symlink_on_path(self, path: str) -> str | None:
        """The first component of path (or path itself) that is a symlink in the tree."""
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if self.kind(prefix) == SYMLINK:
                return prefix
        return None

    def is_ancestor(self, ancestor: str, commit: str) -> bool:
        return False

    def fetch(self) -> SourceTree:
        """Fetch now what reading the tree needs (a lazy tree fetches on its first read)."""
        return self


class FileMap(SourceTree):
    """Files held in memory: path -> (bytes, mode) (files read out of an image or an output)."""

    def __init__(self, files: dict[str, tuple[bytes, int]], description: str):
        self.files, self.description = files, description

    def kind(self, path: str) -> str | None:
        return FILE if path in self.files else None

    def mode(self, path: str) -> int:
        return self.files[path][1] if path in self.files else 0o644

    def read_many(self, paths: Iterable[str]) -> dict[str, bytes | None]:
        return {p: self.files[p][0] if p in self.files else None for p in paths}

    def listing(self) -> list[str]:
        return sorted(self.files)


class DirTree(SourceTree):
    def __init__(self, root: Path, description: str):
        self.root = Path(root)
        self.description = description

    def kind(self, path: str) -> str | None:
        full = self.root / path
        if full.is_symlink():
            return SYMLINK
        if full.is_dir():
            return DIR
        if full.is_file():
            return FILE
        return OTHER if full.exists() else None

    def read_many(self, paths: Iterable[str]) -> dict[str, bytes | None]:
        return {p: (self.root / p).read_bytes() if self.kind(p) == FILE else None for p in paths}

    def mode(self, path: str) -> int:
        return image_mode((self.root / path).stat().st_mode)

    def listing(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file() and not p.is_symlink())


def _archive_top(name: str) -> tuple[str, str]:
    name = clean_name(name)
    top, _, rel = name.partition("/")
    return top, rel


class ArchiveTree(SourceTree):
    """A tar archive whose members sit under one top folder (an sdist)."""

    def __init__(self, archive: Path, sha256: str, home: Path, description: str, version: str | None = None,
                 max_unpacked: int | None = None):
        self.archive = Path(archive)
        self.max_unpacked = max_unpacked
        self.folder = Path(home) / "trees" / sha256
        self.description = description
        self.version = version
        self._index: dict[str, list[object]] | None = None

    def _load_index(self) -> dict[str, list[object]]:
        if self._index is None:
            path = self.folder / "index.json"
            if not path.is_file():
                self._scan(set())
            self._index = json.loads(path.read_text())
        return self._index

    def _scan(self, wanted: set[str]) -> None:
        """One pass over the archive: write the index, extract the wanted regular files."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with mutex(self.folder / ".lock", self.description, quiet=True):
            members: dict[str, list[object]] = {}
            hashes: dict[str, str] = {}
            prefix = None
            budget = Budget(self.description, self.archive.stat().st_size,
                            self.max_unpacked)
            try:
                with tarfile.open(self.archive, "r:*") as tar:
                    for member in tar:
                        budget.take(member.size if member.isreg() else 0)
                        top, rel = _archive_top(member.name)
                        prefix = prefix or top
                        if top != prefix or not rel:
                            continue
                        kind = (FILE if member.isreg() else DIR if member.isdir() else
                                SYMLINK if member.issym() else OTHER)
                        members[rel] = [kind, member.mode & 0o777]
                        if kind == FILE and rel in wanted:
                            handle = tar.extractfile(member)
                            assert handle is not None
                            data = handle.read()
                            write_atomic(self.folder / "files" / rel, data)
                            hashes[rel] = sha256_bytes(data)
            except (OSError, tarfile.TarError, EOFError) as exc:
                if is_disk_full(exc):
                    raise
                raise FetchError(f"{self.description}: cannot read {self.archive.name}: {exc}") from None
            for rel in list(members):
                parts = rel.split("/")
                for i in range(1, len(parts)):
                    members.setdefault("/".join(parts[:i]), [DIR, 0o755])
            write_atomic(self.folder / "extracted.json",
                         json.dumps({**self._extracted(), **hashes}, sort_keys=True).encode())
            write_atomic(self.folder / "index.json", json.dumps(members, sort_keys=True).encode())

    def _extracted(self) -> dict[str, str]:
        """The files taken out of the archive so far, each with the sha256 it had then."""
        try:
            data = json.loads((self.folder / "extracted.json").read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}  # a list: written before hashes were kept

    def kind(self, path: str) -> str | None:
        entry = self._load_index().get(path)
        return str(entry[0]) if entry else None

    def listing(self) -> list[str]:
        return sorted(p for p, entry in self._load_index().items() if entry[0] == FILE)

    def mode(self, path: str) -> int:
        entry = self._load_index().get(path)
        return image_mode(int(str(entry[1]))) if entry else 0o644

    def read_many(self, paths: Iterable[str]) -> dict[str, bytes | None]:
        """The files' bytes as the archive has them: a file extracted earlier is used only while it
        still hashes to what it had when it was extracted; one edited or damaged since is taken out
        of the archive again (and said so)."""
        paths = list(paths)
        if self._index is None and not (self.folder / "index.json").is_file():
            self._scan(set(paths))  # the index and the files in one pass over the archive
        files = [p for p in paths if self.kind(p) == FILE]
        out: dict[str, bytes | None] = {p: None for p in paths}
        extracted = self._extracted()
        for path in files:
            data = self._intact(path, extracted.get(path))
            if data is not None:
                out[path] = data
        missing = {p for p in files if out[p] is None}
        if missing:
            self._scan(missing)
            extracted = self._extracted()
            for path in missing:
                data = (self.folder / "files" / path).read_bytes()
                if sha256_bytes(data) != extracted.get(path):
                    raise FetchError(f"{self.description}: {path} changed on disk while it was extracted")
                out[path] = data
        return out

    def _intact(self, path: str, recorded: str | None) -> bytes | None:
        if recorded is None:
            return None
        try:
            data = (self.folder / "files" / path).read_bytes()
        except OSError:
            return None
        if sha256_bytes(data) != recorded:
            output().say(f"  warning: {self.description}: the extracted copy of {path} in {self.folder} was "
                         "changed after extraction; taking it from the archive again")
            return None
        return data


class GitTree(SourceTree):
    def __init__(self, mirror: Mirror, commit: str, description: str):
        self.mirror, self.commit, self.description = mirror, commit, description
        self._kinds: dict[str, tuple[str, int]] | None = None

    def _load(self) -> dict[str, tuple[str, int]]:
        if self._kinds is None:
            assert self.commit is not None
            self.mirror.fetch_commit(self.commit)
            out = git(["ls-tree", "-r", "-t", "--full-tree", self.commit], cwd=self.mirror.path).out
            kinds: dict[str, tuple[str, int]] = {}
            for line in out.splitlines():
                meta, _, path = line.partition("\t")
                mode, kind, _ = meta.split()
                kinds[path] = (SYMLINK if mode == "120000" else DIR if kind == "tree" else
                               FILE if kind == "blob" else OTHER, image_mode(int(mode, 8)))
            self._kinds = kinds
        return self._kinds

    def fetch(self) -> SourceTree:
        self._load()
        return self

    def kind(self, path: str) -> str | None:
        entry = self._load().get(path)
        return entry[0] if entry else None

    def mode(self, path: str) -> int:
        entry = self._load().get(path)
        return entry[1] if entry else 0o644

    def listing(self) -> list[str]:
        return sorted(p for p, (kind, _) in self._load().items() if kind == FILE)

    def read_many(self, paths: Iterable[str]) -> dict[str, bytes | None]:
        kinds = self._load()
        out: dict[str, bytes | None] = {}
        for path in paths:
            if kinds.get(path, ("", 0))[0] == FILE:
                out[path] = git(["cat-file", "blob", f"{self.commit}:{path}"], cwd=self.mirror.path).stdout
            else:
                out[path] = None
        return out

    def is_ancestor(self, ancestor: str, commit: str) -> bool:
        with self.mirror.lock():
            self.mirror.fetch_history()
        return git(["merge-base", "--is-ancestor", ancestor, commit], cwd=self.mirror.path,
                   check=False).returncode == 0


def archive_to_tree(store: Store, archive: Path, what: str, mtime: int, strip_top: bool = True,
                    max_unpacked: int | None = None) -> Blob:
    """Any tar archive (gz, xz, bz2) rewritten as a normalised tree tar, its top folder removed;
    bounded in what it may expand to (io/unpack.py)."""

    def write(sink: object) -> None:
        writer = TarWriter(sink, mtime=mtime)  # type: ignore[arg-type]
        budget = Budget(what, archive.stat().st_size, max_unpacked)
        try:
            with tarfile.open(archive, "r:*") as tar:
                members = []
                for member in tar:
                    budget.take(member.size if member.isreg() else 0)
                    top, rel = _archive_top(member.name)
                    name = rel if strip_top else clean_name(member.name)
                    if not name or ".." in name.split("/"):
                        continue
                    if member.isreg() or member.isdir() or member.issym() or member.islnk():
                        members.append((name, member))
                for name, member in sorted(members, key=lambda m: m[0]):
                    member.name = name
                    if member.islnk():
                        member.linkname = _archive_top(member.linkname)[1] if strip_top else member.linkname
                    member.uid = member.gid = 0
                    if member.isdir():
                        member.mode = 0o755
                    elif member.isreg():
                        member.mode = image_mode(member.mode)
                    writer.add_member(member, tar.extractfile(member) if member.isreg() else None)
        except (OSError, tarfile.TarError, EOFError) as exc:
            if is_disk_full(exc):
                raise  # the store says which disk (io/store.py)
            raise FetchError(f"{what}: cannot read {archive.name}: {exc}") from None
        writer.close()

    return make_blob(store, what, write)


def folder_to_tree(store: Store, folder: Path, what: str, mtime: int) -> Blob:
    def write(sink: object) -> None:
        writer = TarWriter(sink, mtime=mtime)  # type: ignore[arg-type]
        write_folder(writer, folder)
        writer.close()

    return make_blob(store, what, write)
