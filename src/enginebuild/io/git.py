"""Git sources: a bare mirror per URL in the store, commits fetched by exact id.

Refs resolve to full 40-hex commits with `git ls-remote`; a commit must be reachable
from an upstream branch or tag (a dangling or fork-only commit is refused). Trees are
exported with `git archive`, without a checkout.
"""
from __future__ import annotations

import hashlib
import re
from contextlib import AbstractContextManager
from pathlib import Path

from enginebuild.errors import ResolveError
from enginebuild.io import proc
from enginebuild.io.files import mutex

HEX40 = re.compile(r"[0-9a-f]{40}")
SHORT_HEX = re.compile(r"[0-9a-f]{7,39}")
_GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_COUNT": "1",
    # git's own default since 2.38.1: file:// only when a command asks for it directly (enginebuild
    # fetches every URL itself, a submodule's too, after sources/git.py has judged it), never when
    # git follows one a repository names
    "GIT_CONFIG_KEY_0": "protocol.file.allow",
    "GIT_CONFIG_VALUE_0": "user",
}


def git(args: list[str], *, cwd: Path | str | None = None, check: bool = True,
        what: str | None = None) -> proc.Result:
    return proc.run(["git", *args], cwd=cwd, env=_GIT_ENV, check=check, what=what or "git")


class Mirror:
    def __init__(self, home: Path, url: str) -> None:
        self.url = url
        self.path = Path(home) / "git" / (hashlib.sha256(url.encode()).hexdigest()[:24] + ".git")

    def _ensure(self) -> None:
        if (self.path / "HEAD").is_file():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        git(["init", "--bare", "-q", str(self.path)])
        git(["remote", "add", "origin", self.url], cwd=self.path)
        git(["config", "remote.origin.promisor", "true"], cwd=self.path)
        git(["config", "remote.origin.partialclonefilter", "blob:none"], cwd=self.path)

    def lock(self) -> AbstractContextManager[None]:
        return mutex(self.path.with_suffix(".lock"), f"git mirror of {self.url}", quiet=True)

    def has(self, commit: str) -> bool:
        return (self.path / "HEAD").is_file() and git(
            ["cat-file", "-e", f"{commit}^{{commit}}"], cwd=self.path, check=False).returncode == 0

    def remote_refs(self) -> dict[str, str]:
        """name -> commit for every branch and tag upstream (annotated tags peeled)."""
        result = git(["ls-remote", "--", self.url], check=False)
        if result.returncode != 0:
            last = (result.err.strip().splitlines() or ["no answer"])[-1]
            raise ResolveError(f"cannot list refs of {self.url}: {last}",
                               hint="check the URL and your network access to it")
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
                raise ResolveError(f"commit {commit} is not in {self.url}")

    def resolve(self, ref: str) -> str:
        """A full commit id for a branch, tag, short or full commit id, reachable upstream."""
        refs = self.remote_refs()
        for name in (f"refs/tags/{ref}", f"refs/heads/{ref}", ref):
            if name in refs:
                return refs[name]
        if not (HEX40.fullmatch(ref) or SHORT_HEX.fullmatch(ref)):
            raise ResolveError(f"{self.url} has no branch or tag named {ref!r}")
        if ref in refs.values():
            return ref
        with self.lock():
            self.fetch_history()
            found = git(["rev-parse", "-q", "--verify", f"{ref}^{{commit}}"], cwd=self.path, check=False)
            if found.returncode != 0:
                raise ResolveError(f"{self.url} has no commit {ref}")
            commit = found.out.strip()
            containing = git(["for-each-ref", "--contains", commit, "--format=%(refname)",
                              "refs/remotes/origin", "refs/tags"], cwd=self.path).out.split()
        if not containing:
            raise ResolveError(f"commit {commit} is not reachable from any branch or tag of {self.url}",
                               hint="pin a commit that upstream has published on a branch or tag")
        return commit

    def archive(self, commit: str, prefix: str) -> bytes:
        self.fetch_commit(commit)
        return git(["archive", "--format=tar", f"--prefix={prefix}/", commit], cwd=self.path,
                   what=f"exporting {commit[:12]} of {self.url}").stdout
