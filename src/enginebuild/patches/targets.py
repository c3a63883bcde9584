"""What each patch stack of an image applies to: the pinned source tree, or another version."""
from __future__ import annotations

import re
from dataclasses import dataclass

from enginebuild.errors import LockError, UserError
from enginebuild.http import Http
from enginebuild.lockfile import stale_inputs
from enginebuild.patches.sources import DirTree, GitTree, SdistTree
from enginebuild.resolve.gitsource import Mirror, git
from enginebuild.resolve.pypi import PyPI
from enginebuild.spec import ImageSpec, Source


@dataclass
class StackTarget:
    image: str
    component: str
    patches: list
    tree: object  # None when the source is not pinned where this runs (see `unchecked`)
    source: dict
    override: bool = False
    unchecked: str = ""

    @property
    def description(self) -> str:
        return self.tree.description if self.tree is not None else "(source not pinned here)"

    def is_ancestor(self, ancestor: str, commit: str) -> bool:
        mirror = getattr(self.tree, "mirror", None)
        if mirror is None:
            return False
        with mirror.lock():
            mirror.fetch_history()
        return git(["merge-base", "--is-ancestor", ancestor, commit], cwd=mirror.path, check=False).returncode == 0


def _version_of_ref(ref: str) -> str | None:
    match = re.fullmatch(r"v?(\d+\.\d+(?:\.\d+)*(?:[.-]?(?:rc|post|dev)\d*)?)", ref or "")
    return match.group(1) if match else None


def _sdist_tree(home, pin: dict, http: Http) -> SdistTree:
    from enginebuild.store import Store

    store = Store(home)
    path = store.fetch(http, pin["url"], pin["sha256"], pin["filename"])
    return SdistTree(path, pin["sha256"], home, f"{pin['version']} (sdist {pin['filename']}, "
                                                f"sha256 {pin['sha256'][:12]})", version=pin["version"])


def tree_for(home, source: Source, pin: dict, http: Http, request_ref: str = ""):
    if source.kind == "pypi":
        return _sdist_tree(home, pin, http)
    if source.kind == "git":
        tree = GitTree(Mirror(home, pin["url"]), pin["commit"], f"{pin['url']} at {pin['commit'][:12]}")
        tree.version = _version_of_ref(request_ref)
        return tree
    return DirTree(source.path, f"folder {source.display}")


def override_pin(home, source: Source, ref: str, http: Http) -> dict:
    """The pin of another version of the engine; `latest` is the newest release (or upstream HEAD)."""
    if source.kind == "pypi":
        pypi = PyPI(http)
        version = pypi.project(source.name)[0]["info"]["version"] if ref == "latest" else ref
        return {"kind": "pypi", **pypi.resolve_sdist(source.name, version)}
    if source.kind == "git":
        mirror = Mirror(home, source.url)
        commit = mirror.remote_refs().get("HEAD") if ref == "latest" else mirror.resolve(ref)
        if not commit:
            raise UserError(f"--engine latest: {source.url} advertises no HEAD")
        return {"kind": "git", "url": source.url, "commit": commit}
    raise UserError(f"--engine: the engine's source is a folder of this repository ({source.display}); "
                    "there is no other version to check against")


def stack_targets(home, spec: ImageSpec, lock, *, engine_ref: str | None = None, http: Http | None = None) -> list:
    http = http or Http()
    problems = [p for p in stale_inputs(spec, lock) if p[0] == "lockfile" or p[0] == "engine" or p[0].startswith("plugin.")]
    if problems and not (engine_ref and all(p[0] == "engine" for p in problems)):
        detail = "; ".join(f"{n}: {why}" for n, why in problems)
        raise LockError(f"{spec.file}: the lock does not pin the sources the patches apply to ({detail})",
                        hint=f"run `python BUILD.py lock {spec.name}`")
    targets = []
    if spec.engine and spec.patches:
        source = spec.engine.source
        if engine_ref:
            pin = override_pin(home, source, engine_ref, http)
            request_ref = engine_ref
        else:
            pin = (lock.resolved("engine") if source.kind != "path" else {}) or {}
            request_ref = source.ref
        patches = [p.parsed for p in spec.patches]
        if source.kind != "path" and not pin:
            targets.append(StackTarget(spec.name, spec.engine.name, patches, None, {},
                                       unchecked=lock.unresolved().get("engine", "not resolved")))
        else:
            targets.append(StackTarget(spec.name, spec.engine.name, patches,
                                       tree_for(home, source, pin, http, request_ref), pin, override=bool(engine_ref)))
    for plugin in spec.plugins:
        if not plugin.patches:
            continue
        pin = lock.resolved(f"plugin.{plugin.name}") if plugin.source.kind != "path" else {}
        patches = [p.parsed for p in plugin.patches]
        if plugin.source.kind != "path" and not pin:
            targets.append(StackTarget(spec.name, plugin.name, patches, None, {},
                                       unchecked=lock.unresolved().get(f"plugin.{plugin.name}", "not resolved")))
            continue
        targets.append(StackTarget(spec.name, plugin.name, patches,
                                   tree_for(home, plugin.source, pin, http, plugin.source.ref), pin))
    return targets

