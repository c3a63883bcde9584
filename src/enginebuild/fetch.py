"""Fetching, separate from building: every pinned artifact lands in the store, verified.

`Fetcher.materialize` then hands a stage the exact bytes its key was computed from:
a stored artifact is re-hashed, a repo file must still hash to what was planned.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from enginebuild.atomic import file_lock
from enginebuild.context import ContextItem
from enginebuild.debfile import write_sysroot
from enginebuild.errors import EngineBuildError, FetchError
from enginebuild.http import Http
from enginebuild.lockfile import Lock
from enginebuild.resolve.gitsource import Mirror
from enginebuild.store import Store, sha256_bytes


def artifact_sources(lock: Lock) -> dict:
    """sha256 -> (url, description) for every file the lock pins."""
    out: dict = {}
    system = lock.resolved("system")
    if system:
        for deb in system["packages"]:
            out[deb["sha256"]] = (f"{system['archive']}/{deb['filename']}", f"{deb['name']} {deb['version']} (.deb)")
    python = lock.resolved("python")
    if python:
        for f in python["files"]:
            out[f["sha256"]] = (f["url"], f["filename"])
    for name, entry in lock.inputs.items():
        resolved = entry.get("resolved") or {}
        if (name == "engine" or name.startswith(("plugin.", "vendor."))) and resolved.get("kind") == "pypi":
            out[resolved["sha256"]] = (resolved["url"], resolved["filename"])
    return out


class Fetcher:
    def __init__(self, home: Path, lock: Lock, http: Http | None = None):
        self.home = Path(home)
        self.store = Store(home)
        self.http = http or Http()
        self.sources = artifact_sources(lock)
        self.derived = self.home / "derived"

    def fetch(self, items, report=lambda what, cached: None) -> None:
        """Download what is missing; derive what is derived. A second call costs nothing."""
        for item in items:
            if item.artifact:
                self._artifact(item.artifact, report)
            elif item.derive:
                self._derive(item, report)

    def _artifact(self, sha256: str, report) -> Path:
        if sha256 not in self.sources:
            raise FetchError(f"no source recorded in the lock for sha256 {sha256}")
        url, what = self.sources[sha256]
        cached = self.store.has(sha256)
        path = self.store.fetch(self.http, url, sha256, what)
        report(what, cached)
        return path

    def _derive(self, item: ContextItem, report) -> Path:
        out = self.derived / item.digest
        if out.is_file():
            report(item.arcname, True)
            return out
        self.derived.mkdir(parents=True, exist_ok=True)
        with file_lock(self.derived / f".{item.digest}.lock", item.arcname, quiet=True):
            if out.is_file():
                return out
            kind = item.derive[0]
            fd, tmp = tempfile.mkstemp(dir=self.derived, prefix=f".{item.digest[:12]}.", suffix=".part")
            try:
                with os.fdopen(fd, "wb") as handle:
                    if kind == "sysroot":
                        debs = [self._artifact(sha, report) for sha, _ in item.derive[1]]
                        write_sysroot(debs, handle)
                    elif kind == "git-archive":
                        _, url, commit, prefix = item.derive
                        handle.write(Mirror(self.home, url).archive(commit, prefix))
                    else:
                        raise EngineBuildError(f"unknown derivation {kind}")
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, out)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
        report(item.arcname, False)
        return out

    def materialize(self, item: ContextItem):
        if item.data is not None:
            return item.data
        if item.path is not None:
            data = Path(item.path).read_bytes()
            if sha256_bytes(data) != item.digest:
                raise EngineBuildError(f"{item.path} changed while enginebuild was running; run the command again")
            return data
        if item.artifact:
            return self.store.verified(item.artifact, self.sources.get(item.artifact, ("", item.arcname))[1])
        if item.derive:
            return self._derive(item, lambda *_: None)
        raise EngineBuildError(f"context item {item.arcname} has no content")
