"""`release:` components: the released wheel of a project version for one target platform,
chosen as an installer would (the best tag for CPython `python` on linux/<arch>, then the
highest build number) and pinned by its sha256."""

from __future__ import annotations

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from enginebuild.errors import ResolveError
from enginebuild.io.http import Http
from enginebuild.lock.interpreters import machine_of
from enginebuild.lock.pins import PyPin
from enginebuild.lock.python import target_tags
from enginebuild.recipe.model import Release
from enginebuild.sources.pyindex import IndexFile, project_files


def _same_version(text: str, wanted: str) -> bool:
    try:
        return Version(text) == Version(wanted)
    except InvalidVersion:
        return text == wanted


def tags_for(python: str, platform: str) -> list[Tag]:
    """The tags a wheel may carry for CPython `python` (major.minor) on the platform; with only
    "3" (no Python in the image), those of any CPython 3: version-independent and stable-ABI ones."""
    if "." in python:
        return target_tags(python, machine_of(platform))
    return [t for t in target_tags("3.14", machine_of(platform)) if t.abi in ("none", "abi3")]


def choose(files: list[IndexFile], release: Release, python: str, platform: str) -> IndexFile | None:
    rank = {tag: i for i, tag in enumerate(tags_for(python, platform))}
    best: tuple[int, int, IndexFile] | None = None
    for f in files:
        if f.yanked or not f.filename.endswith(".whl"):
            continue
        try:
            name, version, build, tags = parse_wheel_filename(f.filename)
        except InvalidWheelFilename:
            continue
        ranks = [rank[t] for t in tags if t in rank]
        if name != canonicalize_name(release.name) or not _same_version(str(version), release.version) or not ranks:
            continue
        order = (-min(ranks), build[0] if build else -1)
        if best is None or order > best[:2]:
            best = (*order, f)
    return best[2] if best else None


def resolve_release(http: Http, release: Release, python: str, platform: str) -> PyPin:
    files = project_files(http, release.index, release.name)
    found = choose(files, release, python, platform)
    if found is None:
        wheels = sorted(f.filename for f in files if f.filename.endswith(".whl")
                        and _same_version(f.filename.split("-")[1], release.version))
        raise ResolveError(f"{release.name} {release.version} on {release.index} has no wheel for CPython {python} "
                           f"on {platform}" + (f" (its wheels: {', '.join(wheels[:6])})" if wheels else
                                                " (that release has no wheel there)"),
                           hint="check the version and the image's platforms, or build the component from source")
    return PyPin(canonicalize_name(release.name), release.version, "index", f"{found.filename}", found.url,
                 found.sha256, found.size, release.index)
