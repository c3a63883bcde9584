"""Git sources: a bare mirror per URL in the store, commits fetched by exact id.

Refs resolve to full 40-hex commits with `git ls-remote`; a commit must be reachable
from an upstream branch or tag (a dangling or fork-only commit is refused). Trees are
exported with `git archive`, without a checkout.

A source may be fetched from elsewhere than its URL (`mirrors:` in enginebuild.yaml,
ENGINEBUILD_GIT_MIRRORS): a git bundle, a repository on this machine, another URL, as git's
`url.<base>.insteadOf` would, keyed by the upstream URL or a prefix of it. The lock keeps the
upstream URL and commit; every object fetched is checked by git (`fetch.fsckObjects`), a
commit is taken only by its full id (so the commit a mirror gives is the commit pinned), a
mirror that lacks it, or names another commit for a pinned branch or tag, is refused naming
the mirror, and the first use of a mirror is said.
"""
from __future__ import annotations

import hashlib
import re
from contextlib import AbstractContextManager
from pathlib import Path

from enginebuild.errors import ResolveError
from enginebuild.io import proc
from enginebuild.io.files import mutex
from enginebuild.io.progress import output
from enginebuild.settings import settings

HEX40 = re.compile(r"[0-9a-f]{40}")
SHORT_HEX = re.compile(r"[0-9a-f]{7,39}")
_GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_COUNT": "2",
    "GIT_CONFIG_KEY_1": "fetch.fsckObjects",  # every object fetched, from upstream or a mirror, checked
    "GIT_CONFIG_VALUE_1": "true",
    # git's own default since 2.38.1: file:// only when a command asks for it directly (enginebuild
    # fetches every URL itself, a submodule's too, after sources/git.py has judged it), never when
    # git follows one a repository names
    "GIT_CONFIG_KEY_0": "protocol.file.allow",
    "GIT_CONFIG_VALUE_0": "user",
}


def git(args: list[str], *, cwd: Path | str | None = None, check: bool = True,
        what: str | None = None) -> proc.Result:
    return proc.run(["git", *args], cwd=cwd, env=_GIT_ENV, check=check, what=what or "git")


Mirrors = tuple[tuple[str, str], ...]  # (upstream URL or a prefix ending in /, where to fetch it from)
_said: set[str] = set()  # the mirrors this command has said it fetches from


def forget_said() -> None:
    """A new command says each mirror it fetches from again."""
    _said.clear()


def mirror_of(url: str, mirrors: Mirrors) -> str | None:
    """Where to fetch `url` from instead (ENGINEBUILD_GIT_MIRRORS first, then `mirrors`: those of
    the checkout's enginebuild.yaml): an entry naming the URL itself (a trailing / or .git aside),
    or a prefix of it ending in /."""
    bare = url.rstrip("/").removesuffix(".git")
    for upstream, where in (*settings().git_mirrors, *mirrors):
        if upstream.endswith("/") and url.startswith(upstream) and len(url) > len(upstream):
            return where.rstrip("/") + "/" + url[len(upstream):]
        if bare == upstream.rstrip("/").removesuffix(".git"):
            return where
    return None


class Mirror:
    def __init__(self, home: Path, url: str, mirrors: Mirrors) -> None:
        self.url = url
        self.path = Path(home) / "git" / (hashlib.sha256(url.encode()).hexdigest()[:24] + ".git")
        self.source = mirror_of(url, mirrors) or url  # where it is fetched from

    @property
    def mirrored(self) -> bool:
        return self.source != self.url

    @property
    def named(self) -> str:
        """How messages name where it comes from."""
        return f"{self.url} (from the mirror {self.source})" if self.mirrored else self.url

    def _say(self) -> None:
        if self.mirrored and self.url not in _said:
            _said.add(self.url)
            output().say(f"  {self.url}: fetched from the mirror {self.source}")

    def _ensure(self) -> None:
        self._say()
        if not (self.path / "HEAD").is_file():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            git(["init", "--bare", "-q", str(self.path)])
            git(["remote", "add", "origin", self.source], cwd=self.path)
            git(["config", "remote.origin.promisor", "true"], cwd=self.path)
            git(["config", "remote.origin.partialclonefilter", "blob:none"], cwd=self.path)
            return
        if git(["remote", "get-url", "origin"], cwd=self.path, check=False).out.strip() != self.source:
            git(["remote", "set-url", "origin", self.source], cwd=self.path)  # a mirror named (or dropped) since

    def lock(self) -> AbstractContextManager[None]:
        return mutex(self.path.with_suffix(".lock"), f"git mirror of {self.url}", quiet=True)

    def has(self, commit: str) -> bool:
        return (self.path / "HEAD").is_file() and git(
            ["cat-file", "-e", f"{commit}^{{commit}}"], cwd=self.path, check=False).returncode == 0

    def remote_refs(self) -> dict[str, str]:
        """name -> commit for every branch and tag upstream (annotated tags peeled)."""
        self._say()
        result = git(["ls-remote", "--", self.source], check=False)
        if result.returncode != 0:
            last = (result.err.strip().splitlines() or ["no answer"])[-1]
            raise ResolveError(f"cannot list refs of {self.named}: {last}",
                               hint="check the mirror named in enginebuild.yaml (mirrors) or ENGINEBUILD_GIT_MIRRORS"
                               if self.mirrored else "check the URL and your network access to it")
        refs: dict[str, str] = {}
        for line in result.out.splitlines():
            sha, _, name = line.partition("\t")
            if name.endswith("^{}"):
                refs[name[:-3]] = sha
            elif name not in refs:
                refs[name] = sha
        return refs

    def fetch_history(self) -> None:
        """Every branch and tag, without blobs: enough to test reachability and expand short ids."""
        self._ensure()
        git(["fetch", "-q", "--filter=blob:none", "--no-tags", "origin",
             "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"],
            cwd=self.path, what=f"fetching {self.url}")

    def fetch_commit(self, commit: str) -> None:
        with self.lock():
            if self.has(commit):
                return
            self._ensure()
            shallow = git(["fetch", "-q", "--depth=1", "origin", commit], cwd=self.path, check=False)
            if shallow.returncode != 0 or not self.has(commit):
                self.fetch_history()
            if not self.has(commit):
                raise ResolveError(f"commit {commit} is not in {self.named}",
                                   hint="the mirror lacks the pinned commit: refresh it from upstream"
                                   if self.mirrored else None)

    def _peeled(self, found: str) -> str:
        """The commit an annotated tag names: a bundle's list of refs does not peel tags, as a
        server's does (`^{}`), so the tag is fetched and peeled here."""
        with self.lock():
            self._ensure()
            if not self.has(found):
                self.fetch_history()
            peeled = git(["rev-parse", "-q", "--verify", f"{found}^{{commit}}"], cwd=self.path, check=False)
        if peeled.returncode != 0:
            raise ResolveError(f"{self.named} names {found[:12]} for a tag, which is no commit here")
        return peeled.out.strip()

    def vouch(self, ref: str, commit: str) -> None:
        """A mirror that names another commit than the pinned one for the spec's branch or tag is
        refused (it may serve the commit pinned, yet not be the upstream it stands for)."""
        if not self.mirrored or HEX40.fullmatch(ref):
            return
        refs = self.remote_refs()
        tag, head = refs.get(f"refs/tags/{ref}"), refs.get(f"refs/heads/{ref}")
        served = self._peeled(tag) if tag is not None else head
        if served is not None and served != commit:
            raise ResolveError(f"the mirror {self.source} of {self.url} names commit {served[:12]} for {ref}; the lock "
                               f"pins {commit[:12]}: refused",
                               hint="a mirror must hold what upstream holds: refresh it, or lock again where upstream "
                                    "is reachable")

    def resolve(self, ref: str) -> str:
        """A full commit id for a branch, tag, short or full commit id, reachable upstream."""
        refs = self.remote_refs()
        for name in (f"refs/tags/{ref}", f"refs/heads/{ref}", ref):
            if name in refs:
                return self._peeled(refs[name]) if name.startswith("refs/tags/") and self.mirrored else refs[name]
        if not (HEX40.fullmatch(ref) or SHORT_HEX.fullmatch(ref)):
            raise ResolveError(f"{self.named} has no branch or tag named {ref!r}")
        if ref in refs.values():
            return ref
        with self.lock():
            self.fetch_history()
            found = git(["rev-parse", "-q", "--verify", f"{ref}^{{commit}}"], cwd=self.path, check=False)
            if found.returncode != 0:
                raise ResolveError(f"{self.named} has no commit {ref}")
            commit = found.out.strip()
            containing = git(["for-each-ref", "--contains", commit, "--format=%(refname)",
                              "refs/remotes/origin", "refs/tags"], cwd=self.path).out.split()
        if not containing:
            raise ResolveError(f"commit {commit} is not reachable from any branch or tag of {self.named}",
                               hint="pin a commit that upstream has published on a branch or tag")
        return commit

    def archive(self, commit: str, prefix: str) -> bytes:
        self.fetch_commit(commit)
        return git(["archive", "--format=tar", f"--prefix={prefix}/", commit], cwd=self.path,
                   what=f"exporting {commit[:12]} of {self.url}").stdout
