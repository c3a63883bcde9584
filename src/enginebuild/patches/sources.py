"""Upstream source trees to check patches against, read without a full checkout.

- an sdist from the store: one pass over the archive indexes every member and extracts
  only the files a patch stack touches, into a cache keyed by the sdist's sha256;
- a git commit in a bare mirror: `git ls-tree` and `git cat-file`, no work tree;
- a folder of the repository.
"""
from __future__ import annotations

import json
import tarfile
from pathlib import Path

from enginebuild.atomic import file_lock, write_atomic
from enginebuild.errors import FetchError
from enginebuild.resolve.gitsource import Mirror, git

FILE, DIR, SYMLINK, OTHER = "file", "dir", "symlink", "other"


class SourceTree:
    description = ""
    version: str | None = None  # a release version, where the tree is one
    commit: str | None = None

    def kind(self, path: str) -> str | None:
        raise NotImplementedError

    def read_many(self, paths) -> dict:
        raise NotImplementedError

    def symlink_on_path(self, path: str) -> str | None:
        """The first component of path (or path itself) that is a symlink in the tree."""
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if self.kind(prefix) == SYMLINK:
                return prefix
        return None


class DirTree(SourceTree):
    def __init__(self, root: Path, description: str):
        self.root = Path(root)
        self.description = description

    def kind(self, path):
        full = self.root / path
        if full.is_symlink():
            return SYMLINK
        if full.is_dir():
            return DIR
        if full.is_file():
            return FILE
        return OTHER if full.exists() else None

    def read_many(self, paths):
        return {p: (self.root / p).read_bytes() if self.kind(p) == FILE else None for p in paths}


class SdistTree(SourceTree):
    def __init__(self, archive: Path, sha256: str, cache_root: Path, description: str, version: str | None = None):
        self.archive = Path(archive)
        self.folder = Path(cache_root) / "trees" / sha256
        self.description = description
        self.version = version
        self._index: dict | None = None

    def _load_index(self) -> dict:
        if self._index is None:
            path = self.folder / "index.json"
            if not path.is_file():
                self._scan(set())
            self._index = json.loads(path.read_text())
        return self._index

    def _scan(self, wanted: set) -> None:
        """One pass over the archive: write the index, extract the wanted regular files."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with file_lock(self.folder / ".lock", self.description, quiet=True):
            members: dict = {}
            prefix = None
            try:
                with tarfile.open(self.archive, "r:*") as tar:
                    for member in tar:
                        name = member.name[2:] if member.name.startswith("./") else member.name
                        top, _, rel = name.partition("/")
                        prefix = prefix or top
                        if top != prefix or not rel:
                            continue
                        rel = rel.rstrip("/")
                        kind = FILE if member.isreg() else DIR if member.isdir() else SYMLINK if member.issym() else OTHER
                        members[rel] = kind
                        if kind == FILE and rel in wanted:
                            target = self.folder / "files" / rel
                            target.parent.mkdir(parents=True, exist_ok=True)
                            write_atomic(target, tar.extractfile(member).read())
            except (OSError, tarfile.TarError) as exc:
                raise FetchError(f"{self.description}: cannot read {self.archive.name}: {exc}") from None
            # parent folders implied by file names
            for rel in list(members):
                parts = rel.split("/")
                for i in range(1, len(parts)):
                    members.setdefault("/".join(parts[:i]), DIR)
            extracted = set(wanted)
            old = self.folder / "extracted.json"
            if old.is_file():
                extracted |= set(json.loads(old.read_text()))
            write_atomic(self.folder / "extracted.json", json.dumps(sorted(extracted)).encode())
            write_atomic(self.folder / "index.json", json.dumps(members, sort_keys=True).encode())

    def kind(self, path):
        return self._load_index().get(path)

    def read_many(self, paths):
        index = self._load_index()
        files = [p for p in paths if index.get(p) == FILE]
        done_path = self.folder / "extracted.json"
        done = set(json.loads(done_path.read_text())) if done_path.is_file() else set()
        if set(files) - done:
            self._scan(set(files))
        return {p: (self.folder / "files" / p).read_bytes() if index.get(p) == FILE else None for p in paths}


class GitTree(SourceTree):
    def __init__(self, mirror: Mirror, commit: str, description: str):
        self.mirror, self.commit, self.description = mirror, commit, description
        self._kinds: dict | None = None

    def _load(self) -> dict:
        if self._kinds is None:
            self.mirror.fetch_commit(self.commit)
            out = git(["ls-tree", "-r", "-t", "--full-tree", self.commit], cwd=self.mirror.path).out
            kinds = {}
            for line in out.splitlines():
                meta, _, path = line.partition("\t")
                mode, kind, _ = meta.split()
                kinds[path] = SYMLINK if mode == "120000" else DIR if kind == "tree" else FILE if kind == "blob" else OTHER
            self._kinds = kinds
        return self._kinds

    def kind(self, path):
        return self._load().get(path)

    def read_many(self, paths):
        kinds = self._load()
        out = {}
        for path in paths:
            if kinds.get(path) == FILE:
                out[path] = git(["cat-file", "blob", f"{self.commit}:{path}"], cwd=self.mirror.path).stdout
            else:
                out[path] = None
        return out

