"""`git: {url, ref | commit, submodules, metadata, version}`: a commit of a git repository.

`lock` pins the ref to a full commit reachable from an upstream branch or tag; with
`submodules: true` every submodule (recursively) is pinned by the commit the superproject
records. The tree a build receives is `git archive` of the commit, the submodules at their
paths, and, with `metadata: true`, a small `.git` (the commit, detached HEAD, the tags that
point at it, and an index of its tree) so `git rev-parse HEAD`, `git status`, `git describe
--dirty` and setuptools-scm see a clean checkout. `version:` injects a version
instead: builds see SETUPTOOLS_SCM_PRETEND_VERSION (see docs/spec.md, *Sources*).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from enginebuild.io.store import HashingWriter

import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urljoin

from enginebuild.core.schema import Bool, Record, Str
from enginebuild.errors import ResolveError, UserError
from enginebuild.io.git import HEX40, Mirror, Mirrors, git, mirror_of
from enginebuild.io.store import Blob, make_blob, sha256_bytes
from enginebuild.io.tarrules import clean_name
from enginebuild.io.tars import TarWriter, walk_folder
from enginebuild.sources.base import Context, Kind, Place
from enginebuild.sources.trees import GitTree, SourceTree
from enginebuild.wire import JsonDoc

MAX_SUBMODULE_DEPTH = 4


def _git_url(value: str) -> str | None:
    if value.startswith("-") or any(c.isspace() for c in value):
        return f"invalid git URL {value!r}"
    if not re.match(r"(?:https?|ssh|git|file)://|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:", value):
        return f"expected a git URL (https://, ssh://, git@host:, file://), got {value!r}"
    return None


def _local(url: str) -> bool:
    """A URL git reads from this machine's files."""
    return url.startswith("file:") or url.startswith("/") or not re.match(r"[A-Za-z][A-Za-z0-9+.-]*://|[^/]+@[^/]+:", url)


def _git_ref(value: str) -> str | None:
    if (value.startswith("-") or ".." in value or value.endswith(".lock") or value.endswith("/")
            or not re.fullmatch(r"[A-Za-z0-9._/+-]{1,200}", value)):
        return f"invalid git ref {value!r}"
    return None


@dataclass(frozen=True)
class GitRequest:
    url: str
    ref: str
    submodules: bool = False
    metadata: bool = False
    version: str | None = None


@dataclass(frozen=True)
class Submodule:
    path: str
    url: str
    commit: str


@dataclass(frozen=True)
class GitPin:
    url: str
    commit: str
    submodules: tuple[Submodule, ...] = ()


def _version_of_ref(ref: str) -> str | None:
    match = re.fullmatch(r"v?(\d+\.\d+(?:\.\d+)*(?:[.-]?(?:rc|post|dev)\d*)?)", ref or "")
    return match.group(1) if match else None


def _submodules(home: Path, url: str, commit: str, mirrors: Mirrors, depth: int = 0) -> tuple[Submodule, ...]:
    """The submodules a commit records: path, URL (relative ones resolved) and gitlink commit."""
    mirror = Mirror(home, url, mirrors)
    mirror.fetch_commit(commit)
    config = git(["config", "--blob", f"{commit}:.gitmodules", "--list"], cwd=mirror.path, check=False)
    if config.returncode != 0:
        return ()
    paths: dict[str, str] = {}
    urls: dict[str, str] = {}
    for line in config.out.splitlines():
        key, _, value = line.partition("=")
        match = re.fullmatch(r"submodule\.(.+)\.(path|url)", key)
        if match:
            (paths if match.group(2) == "path" else urls)[match.group(1)] = value
    links = {}
    for line in git(["ls-tree", "-r", commit], cwd=mirror.path).out.splitlines():
        meta, _, path = line.partition("\t")
        mode, kind, sha = meta.split()
        if mode == "160000":
            links[path] = sha
    out = []
    for name, path in sorted(paths.items(), key=lambda kv: kv[1]):
        if path not in links or name not in urls:
            continue
        sub_url = urls[name]
        if sub_url.startswith(("./", "../")):
            sub_url = urljoin(url.rstrip("/") + "/", sub_url)
        if _git_url(sub_url):
            raise ResolveError(f"{url} at {commit[:12]}: submodule {path} has an unusable URL {sub_url!r}")
        if _local(sub_url) and not _local(url):
            raise ResolveError(f"{url} at {commit[:12]}: submodule {path} names {sub_url!r}, a repository on this "
                               "machine: a repository from elsewhere may not reach into this machine's files",
                               hint="only a repository on this machine (file://) may have local submodules")
        out.append(Submodule(path, sub_url, links[path]))
        if depth + 1 < MAX_SUBMODULE_DEPTH:
            out += [Submodule(f"{path}/{s.path}", s.url, s.commit) for s in _submodules(home, sub_url, links[path], mirrors,
                                                                                          depth + 1)]
    return tuple(out)


class GitKind:
    name = "git"
    doc = ("`{url, ref}` or `{url, commit}` (40 hex), with `submodules`, `metadata` (a small .git) or an "
           "injected `version`")
    schema = Record(
        {"url": Str(test=_git_url, what="a git URL"), "ref": Str(test=_git_ref, what="a git ref"),
         "commit": Str(pattern=r"[0-9a-f]{40}", what="a full commit id (40 lower-case hex digits)"),
         "submodules": Bool(), "metadata": Bool(),
         "version": Str(pattern=r"[0-9][A-Za-z0-9.+!-]{0,63}", what="a version such as 0.21.0")},
        exclusive=(("ref", "commit"),), need_one_of=("ref", "commit"), required=("url",),
        doc="{url, ref} or {url, commit}")

    def request(self, node: JsonDoc, place: Place, default_name: str) -> GitRequest:
        return GitRequest(str(node["url"]), str(node.get("ref") or node.get("commit")),
                          bool(node.get("submodules", False)), bool(node.get("metadata", False)),
                          node.get("version"))

    def request_json(self, request: GitRequest) -> JsonDoc:
        body: JsonDoc = {"url": request.url, "ref": request.ref}
        if request.submodules:
            body["submodules"] = True
        return body

    def resolve(self, request: GitRequest, ctx: Context) -> GitPin:
        commit = Mirror(ctx.home, request.url, ctx.mirrors).resolve(request.ref)
        subs = _submodules(ctx.home, request.url, commit, ctx.mirrors) if request.submodules else ()
        return GitPin(request.url, commit, subs)

    def pin_json(self, pin: GitPin) -> JsonDoc:
        body: JsonDoc = {"url": pin.url, "commit": pin.commit}
        if pin.submodules:
            body["submodules"] = [{"path": s.path, "url": s.url, "commit": s.commit} for s in pin.submodules]
        return body

    def pin_from_json(self, data: JsonDoc) -> GitPin:
        subs = tuple(Submodule(str(s["path"]), str(s["url"]), str(s["commit"])) for s in data.get("submodules") or [])
        return GitPin(str(data["url"]), str(data["commit"]), subs)

    def identity(self, request: GitRequest, pin: GitPin, only: Callable[[str], bool] | None = None) -> str:
        subs = ",".join(f"{s.path}@{s.commit}" for s in pin.submodules)
        meta = "indexed" if request.metadata else False  # "indexed": the .git has an index (a tree made before had none)
        return sha256_bytes(f"git {pin.url} {pin.commit} [{subs}] metadata={meta}".encode())

    def describe(self, request: GitRequest, pin: GitPin | None) -> str:
        return f"git {request.url} @ {pin.commit[:12] if pin else request.ref}"

    def origin(self, pin: GitPin) -> tuple[str, str, str]:
        return pin.commit, "", pin.url

    def version(self, request: GitRequest, pin: GitPin | None) -> str | None:
        return request.version or _version_of_ref(request.ref)

    def tree(self, request: GitRequest, pin: GitPin, ctx: Context) -> SourceTree:
        mirror = Mirror(ctx.home, pin.url, ctx.mirrors)
        mirror.vouch(request.ref, pin.commit)
        tree = GitTree(mirror, pin.commit, f"{pin.url} at {pin.commit[:12]}")
        tree.version = self.version(request, pin)
        return tree

    def tree_tar(self, request: GitRequest, pin: GitPin, ctx: Context) -> Blob:
        Mirror(ctx.home, pin.url, ctx.mirrors).vouch(request.ref, pin.commit)
        key = sha256_bytes(f"git-tree-v1 {self.identity(request, pin)} {ctx.mtime}".encode())
        return ctx.store.derived("trees", key, f"{pin.url} at {pin.commit[:12]}",
                                 lambda: make_blob(ctx.store, pin.url, lambda sink: self._write(request, pin, ctx, sink)))

    def _write(self, request: GitRequest, pin: GitPin, ctx: Context, sink: HashingWriter) -> None:
        writer = TarWriter(sink, mtime=ctx.mtime)
        for prefix, url, commit in [("", pin.url, pin.commit)] + [(s.path, s.url, s.commit) for s in pin.submodules]:
            mirror = Mirror(ctx.home, url, ctx.mirrors)
            mirror.fetch_commit(commit)
            with tempfile.TemporaryFile() as archive:
                data = git(["archive", "--format=tar", commit], cwd=mirror.path,
                           what=f"exporting {commit[:12]} of {url}").stdout
                archive.write(data)
                archive.seek(0)
                with tarfile.open(fileobj=archive, mode="r:") as tar:
                    for member in tar:
                        if member.name == "pax_global_header" or member.type == tarfile.XGLTYPE:
                            continue
                        name = clean_name(f"{prefix}/{member.name}" if prefix else member.name)
                        if not name or (prefix and name == prefix):
                            continue
                        member.name = name
                        member.uid = member.gid = 0
                        writer.add_member(member, tar.extractfile(member) if member.isreg() else None)
        if request.metadata:
            self._write_metadata(pin, ctx, writer)
        writer.close()

    def _write_metadata(self, pin: GitPin, ctx: Context, writer: TarWriter) -> None:
        """A small repository: the commit's objects (shallow), HEAD detached at it, and its tags."""
        mirror = Mirror(ctx.home, pin.url, ctx.mirrors)
        with mirror.lock():
            mirror.fetch_history()
        tags = git(["tag", "--points-at", pin.commit], cwd=mirror.path).out.split()
        folder = Path(tempfile.mkdtemp(prefix="enginebuild-gitmeta-"))
        try:
            git(["init", "-q", str(folder)])
            git(["fetch", "-q", "--depth=1", "--no-tags", str(mirror.path), pin.commit], cwd=folder)
            (folder / ".git" / "HEAD").write_text(pin.commit + "\n")
            for tag in tags:
                if re.fullmatch(r"[A-Za-z0-9._/+-]+", tag):
                    git(["update-ref", f"refs/tags/{tag}", pin.commit], cwd=folder)
            # an index of the commit's tree (no stat data: git compares contents on first look), so that
            # `git status`, `git describe --dirty` and setuptools-scm see the unpatched tree as clean
            git(["read-tree", pin.commit], cwd=folder)
            for name in ("logs", "hooks", "FETCH_HEAD", "description", "info", "ORIG_HEAD"):
                target = folder / ".git" / name
                if target.is_dir():
                    shutil.rmtree(target)
                elif target.exists():
                    target.unlink()
            (folder / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = false\n")
            for entry in walk_folder(folder / ".git"):
                name = f".git/{entry.rel}"
                if entry.kind == "dir":
                    writer.add_dir(name)
                elif entry.kind == "file":
                    writer.add_file(name, entry.path, 0o644)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def fetched_from(self, request: GitRequest, mirrors: Mirrors) -> str | None:
        return mirror_of(request.url, mirrors)

    def watched_paths(self, request: GitRequest) -> list[Path]:
        return []

    def downloads(self, pin: GitPin) -> list[tuple[str, list[str], str, int | None]]:
        return []

    def project(self, request: GitRequest) -> tuple[str, ...]:
        return ("git", request.url.rstrip("/").removesuffix(".git").lower())

    def override(self, request: GitRequest, ref: str, ctx: Context) -> tuple[GitRequest, GitPin]:
        mirror = Mirror(ctx.home, request.url, ctx.mirrors)
        if ref == "latest":
            commit = mirror.remote_refs().get("HEAD")
            if not commit or not HEX40.fullmatch(commit):
                raise UserError(f"--engine latest: {request.url} advertises no HEAD")
        else:
            commit = mirror.resolve(ref)
        pin = GitPin(request.url, commit, _submodules(ctx.home, request.url, commit, ctx.mirrors) if request.submodules else ())
        return replace(request, ref=ref), pin


KIND: Kind[GitRequest, GitPin] = GitKind()
