"""Python packages pinned through PyPI's JSON API: exact version, file, sha256.

The JSON API answers file URLs that may be relative to the document (as some mirrors
do), so every URL is joined against the document's own address.
"""
from __future__ import annotations

from urllib.parse import urljoin

from packaging.requirements import Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from enginebuild.errors import ResolveError
from enginebuild.http import Http, HttpFailure

_ARCH = {"arm64": "aarch64", "amd64": "x86_64", "ppc64le": "ppc64le", "s390x": "s390x"}


def target_tags(python_version: str, arch: str) -> list:
    """The wheel tags a CPython of that version on linux/<arch> accepts, best first."""
    major, minor = (int(x) for x in python_version.split("."))
    machine = _ARCH.get(arch, arch)
    platforms = [f"manylinux_2_{m}_{machine}" for m in range(39, 16, -1)]
    platforms += [f"manylinux2014_{machine}", f"linux_{machine}"]
    if machine == "x86_64":
        platforms[-1:-1] = ["manylinux2010_x86_64", "manylinux1_x86_64"]
    tags = list(cpython_tags((major, minor), platforms=platforms))
    tags += list(compatible_tags((major, minor), interpreter=f"cp{major}{minor}", platforms=platforms))
    return tags


class PyPI:
    def __init__(self, http: Http, index: str = "https://pypi.org"):
        self.http = http
        self.index = index.rstrip("/")
        self._cache: dict = {}

    def project(self, name: str) -> tuple:
        """The project's JSON document and its URL (per-version documents are not served everywhere)."""
        key = canonicalize_name(name)
        if key in self._cache:
            return self._cache[key]
        url = f"{self.index}/pypi/{key}/json"
        try:
            response = self.http.request("GET", url)
        except HttpFailure as exc:
            raise ResolveError(f"PyPI: {exc}", hint="check network access to the index") from None
        if response.status_code == 404:
            raise ResolveError(f"PyPI has no project named {name!r} ({self.index})")
        if response.status_code != 200:
            raise ResolveError(f"PyPI answered HTTP {response.status_code} for {url}")
        try:
            self._cache[key] = (response.json(), response.url or url)
        except ValueError:
            raise ResolveError(f"PyPI answered something that is not JSON for {url}") from None
        return self._cache[key]

    def choose_version(self, requirement: Requirement) -> str:
        pinned = [s for s in requirement.specifier if s.operator in ("==", "===") and "*" not in s.version]
        if len(pinned) == 1:
            return pinned[0].version
        data, _ = self.project(requirement.name)
        available = []
        for text, files in (data.get("releases") or {}).items():
            try:
                version = Version(text)
            except InvalidVersion:
                continue
            if files and not all(f.get("yanked") for f in files):
                available.append(version)
        candidates = list(requirement.specifier.filter(available))
        if not candidates:
            raise ResolveError(f"no release of {requirement.name} on PyPI satisfies {requirement}")
        return str(max(candidates))

    def release_files(self, name: str, version: str) -> list:
        data, url = self.project(name)
        releases = data.get("releases") or {}
        if version not in releases:
            raise ResolveError(f"PyPI has no release {version} of {name}")
        files = []
        for entry in releases[version]:
            sha = (entry.get("digests") or {}).get("sha256")
            if not sha or entry.get("yanked"):
                continue
            files.append({
                "filename": entry["filename"],
                "url": urljoin(url, entry["url"]),
                "sha256": sha,
                "size": int(entry.get("size") or 0),
                "packagetype": entry.get("packagetype", ""),
            })
        return files

    def resolve_sdist(self, name: str, version: str) -> dict:
        files = [f for f in self.release_files(name, version) if f["packagetype"] == "sdist"]
        if not files:
            raise ResolveError(f"PyPI has no source distribution of {name}=={version}")
        chosen = files[0]
        return {"name": canonicalize_name(name), "version": version, "filename": chosen["filename"],
                "url": chosen["url"], "sha256": chosen["sha256"], "size": chosen["size"]}

    def resolve_requirement(self, text: str, tags: list) -> dict:
        requirement = Requirement(text)
        version = self.choose_version(requirement)
        files = self.release_files(requirement.name, version)
        rank = {tag: i for i, tag in enumerate(tags)}
        best, best_rank = None, None
        for entry in files:
            if not entry["filename"].endswith(".whl"):
                continue
            try:
                _, _, _, wheel_tags = parse_wheel_filename(entry["filename"])
            except ValueError:
                continue
            ranks = [rank[t] for t in wheel_tags if isinstance(t, Tag) and t in rank]
            if ranks and (best_rank is None or min(ranks) < best_rank):
                best, best_rank = entry, min(ranks)
        if best is None:
            sdists = [f for f in files if f["packagetype"] == "sdist"]
            if not sdists:
                raise ResolveError(f"{requirement.name}=={version} has no wheel for this platform and no sdist")
            best = sdists[0]
        return {"requirement": text, "name": canonicalize_name(requirement.name), "version": version,
                "filename": best["filename"], "url": best["url"], "sha256": best["sha256"], "size": best["size"]}


__all__ = ["PyPI", "target_tags"]
