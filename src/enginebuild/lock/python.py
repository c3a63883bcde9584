"""Python requirements locked by a real resolver: uv, for the target platform and Python.

uv resolves the whole closure (extras and markers included) for `linux/<arch>`, CPython
`python.version`, into a PEP 751 lock (`pylock.toml`), which we read into our own pins:
every distribution with its version, file, URL and sha256. Named indexes are pinned per
package (a package pinned to the PyTorch index is never taken from PyPI); git requirements
are pinned to a full commit; URL requirements must carry their sha256. The distributions
the base already ships constrain the resolution, so nothing the base has is replaced
silently; they are recorded as provided by the base and not installed again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from enginebuild.errors import LockError, ResolveError, ToolMissing, UserError, printable
from enginebuild.io import proc
from enginebuild.io.http import Http, HttpFailure
from enginebuild.lock.interpreters import machine_of
from enginebuild.lock.pins import ImagePin, PyPin, PythonPin
from enginebuild.lock.wheelfiles import with_shares
from enginebuild.oci.rootfs import DIST_NAME, dist_version
from enginebuild.recipe.model import PyRequirement, Python
from enginebuild.sources.base import DEFAULT_INDEX
from enginebuild.wire import JsonDoc

GLIBC = "2_35"  # Ubuntu 22.04 and later, Debian 12: the bases Spark images use


class ResolutionConflict(UserError):
    """The requirements (with what the base ships) cannot be satisfied together."""


# distributions that only work together when they come from the same release
SAME_RELEASE = (("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache"),)


def check_same_release(pins: dict[str, PyPin], origins: Origins) -> None:
    for group in SAME_RELEASE:
        found = [pins[n] for n in group if n in pins and pins[n].version]
        try:
            releases = {p.name: Version(p.version).public for p in found}
        except InvalidVersion:
            continue
        if len(set(releases.values())) > 1:
            named = []
            for p in found:
                where = (f"required at {origins.spec[p.name]}" if p.name in origins.spec else
                         f"shipped by the base {origins.base_ref}" if p.origin == "base" else
                         "needed by another requirement")
                named.append(f"{p.name}=={p.version} ({where})")
            raise ResolutionConflict(f"{' and '.join(named)} come from different releases; "
                                     f"{', '.join(group)} only work together from one release",
                                     hint="pin them to the same version")


def target_tags(python_version: str, machine: str) -> list[Tag]:
    """The wheel tags a CPython of that version on linux/<machine> accepts, best first."""
    major, minor = (int(x) for x in python_version.split("."))
    glibc_minor = int(GLIBC.split("_")[1])
    platforms = [f"manylinux_2_{m}_{machine}" for m in range(glibc_minor, 16, -1)]
    platforms += [f"manylinux2014_{machine}", f"linux_{machine}"]
    if machine == "x86_64":
        platforms[-1:-1] = ["manylinux2010_x86_64", "manylinux1_x86_64"]
    tags = list(cpython_tags((major, minor), platforms=platforms))
    tags += list(compatible_tags((major, minor), interpreter=f"cp{major}{minor}", platforms=platforms))
    return tags


def uv_binary() -> str:
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise ToolMissing("uv is not installed (enginebuild locks Python requirements with it)",
                      hint="python3 -m pip install -r requirements.txt")


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


@dataclass
class Origins:
    """Where each name in a resolution comes from, for conflict messages."""

    spec: dict[str, str]
    base: dict[str, str]
    base_ref: str

    def explain(self, text: str) -> list[str]:
        out = []
        for name, where in sorted(self.spec.items()):
            if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text, re.I):
                out.append(f"{name}: required at {where}")
        for name, version in sorted(self.base.items()):
            if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text, re.I):
                out.append(f"{name}=={version}: shipped by the base {self.base_ref}")
        return out


def _pyproject(reqs: list[PyRequirement], python: Python) -> str:
    deps = ", ".join(_toml(r.text) for r in reqs)
    lines = ["[project]", 'name = "enginebuild-resolution"', 'version = "0"', f"dependencies = [{deps}]", ""]
    for name, url in python.indexes:
        lines += ["[[tool.uv.index]]", f"name = {_toml(name)}", f"url = {_toml(url)}", "explicit = true", ""]
    sources = []
    for r in reqs:
        if r.index:
            sources.append(f"{_toml(r.name)} = {{ index = {_toml(r.index)} }}")
        elif r.git_url:
            sources.append(f"{_toml(r.name)} = {{ git = {_toml(r.git_url)}, rev = {_toml(r.git_ref or '')} }}")
        elif r.url:
            sources.append(f"{_toml(r.name)} = {{ url = {_toml(r.url)} }}")
    if sources:
        lines += ["[tool.uv.sources]", *sources, ""]
    return "\n".join(lines)


def provided_wheel(folder: Path, name: str, version: str) -> Path:
    """A wheel that says only "NAME VERSION is here": what the base has installed, offered to
    the resolver beside the indexes, so a distribution no index serves (NGC's torch
    2.11.0+cu130) satisfies what needs it. It has no requirements: what the base installed
    with it is there too (and constrained to the base's versions). It is never installed. `name`
    and `version` come from a base's metadata (through the lock): anything but a distribution's
    name and a version is refused, never made a file name."""
    if not DIST_NAME.fullmatch(name) or not dist_version(version):
        raise LockError(f"the base's Python distributions list {printable(name[:80])!r} "
                        f"{printable(version[:80])!r}, not a distribution's name and version",
                        hint="lock again (the base is read anew), or check python_dists in the lockfile")
    dist = canonicalize_name(name).replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: enginebuild\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             f"{info}/RECORD": f"{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n"}
    with zipfile.ZipFile(path, "w") as archive:
        for arcname, text in files.items():
            archive.writestr(zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0)), text)
    return path


def _compile(home: Path, folder: Path, python: Python, machine: str, reqs: list[PyRequirement], constraints: list[str],
             origins: Origins, no_deps: bool, provided: dict[str, str] | None = None) -> JsonDoc:
    (folder / "pyproject.toml").write_text(_pyproject(reqs, python))
    (folder / "constraints.txt").write_text("".join(f"{c}\n" for c in constraints))
    (folder / "overrides.txt").write_text("".join(f"{c}\n" for c in python.overrides))
    (folder / "provided").mkdir()
    for name, version in sorted((provided or {}).items()):
        provided_wheel(folder / "provided", name, version)
    args = [uv_binary(), "pip", "compile", "pyproject.toml", "--python-version", python.version,
            "--python-platform", f"{machine}-manylinux_{GLIBC}", "--format", "pylock.toml", "-o", "pylock.toml",
            "--default-index", DEFAULT_INDEX, "--constraints", "constraints.txt", "--overrides", "overrides.txt",
            "--find-links", "provided", "--no-header", "--quiet",
            "--refresh"]  # a lock sees each index as it is now, never a page cached earlier
    if no_deps:
        args.append("--no-deps")
    env = {"UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1", "UV_CACHE_DIR": str(home / "uv-cache"),
           "UV_NO_PROGRESS": "1"}
    result = proc.run(args, cwd=folder, env=env, check=False)
    if result.returncode != 0:
        text = result.err.strip()
        unknown = re.search(r"Because (\S+) was not found in the (?:package registry|provided package locations)", text)
        if unknown:  # a name no index has (a typo): no conflict to relax
            name = unknown.group(1)
            where = origins.explain(text)
            raise ResolveError(f"no index has a distribution named {name!r}"
                               + (f" (asked for by {where[0]})" if where else ""),
                               hint="check its spelling as the index writes it (pypi.org/project/NAME), or the "
                                    "index it is pinned to (python.indexes)")
        if "No solution found" in text or "unsatisfiable" in text:
            explanation = [line.strip(" ×╰─▶│") for line in text.splitlines() if line.strip(" ×╰─▶│")]
            involved = origins.explain(text)
            raise ResolutionConflict(
                "the Python requirements cannot be satisfied together:\n    " + "\n    ".join(explanation[-12:])
                + ("\n  involved:\n    " + "\n    ".join(involved) if involved else ""),
                hint="relax a requirement" + (", or require the base's distribution at the version needed "
                                              "(NAME==VERSION replaces what the base ships)"
                                              if any("shipped by the base" in line for line in involved) else ""))
        fetched = re.search(r"Failed to fetch: `?(\S+?)`?$", text, re.M)
        if fetched:  # an index that did not answer: named, by its name in the spec where it has one
            url = fetched.group(1)
            named = [(name, base) for name, base in python.indexes if url.startswith(base.rstrip("/") + "/")]
            which = f"index {named[0][0]} ({named[0][1]})" if named else \
                ("the default index" if url.startswith(DEFAULT_INDEX.rstrip("/") + "/") else "an index")
            cause = text.splitlines()[-1].strip().removeprefix("cause: ") if text else ""
            raise ResolveError(f"uv could not read {which}: {url}: {cause}",
                               hint="check the index's URL in the spec (python.indexes) and this machine's access to it")
        reason = [printable(line.strip(" ×╰─▶│"))[:300] for line in text.splitlines() if line.strip(" ×╰─▶│")]
        raise ResolveError("uv could not resolve the Python requirements:\n    " + "\n    ".join(reason[-20:]),
                           hint="check the requirements and access to their indexes")
    return tomllib.loads((folder / "pylock.toml").read_text())


def _choose_wheel(wheels: list[JsonDoc], tags: list[Tag]) -> JsonDoc | None:
    rank = {tag: i for i, tag in enumerate(tags)}
    best, best_rank = None, None
    for wheel in wheels:
        filename = wheel["url"].rsplit("/", 1)[-1]
        try:
            wheel_tags = parse_wheel_filename(filename)[3]
        except ValueError:
            continue
        ranks = [rank[t] for t in wheel_tags if t in rank]
        if ranks and (best_rank is None or min(ranks) < best_rank):
            best, best_rank = wheel, min(ranks)
    return best


def _pins(doc: JsonDoc, tags: list[Tag], indexes: dict[str, str], requested: dict[str, PyRequirement],
          base: dict[str, str], platform: str, python: Python) -> list[PyPin]:
    out = []
    for package in doc.get("packages", []):
        name, version = canonicalize_name(package["name"]), str(package.get("version", ""))
        req = requested.get(name)
        if name in base and base[name] == version and not (req and (req.git_url or req.url)):
            out.append(PyPin(name, version, "base"))
            continue
        replaces = base.get(name, "")
        if "vcs" in package:
            vcs = package["vcs"]
            out.append(PyPin(name, version, "git", url=vcs["url"], commit=vcs["commit-id"], replaces=replaces))
            continue
        if "archive" in package:
            archive = package["archive"]
            sha = (archive.get("hashes") or {}).get("sha256", "")
            if req and req.sha256 and sha and sha != req.sha256:
                raise ResolveError(f"{req.url} has sha256 {sha}, the spec pins {req.sha256}")
            out.append(PyPin(name, version, "url", filename=archive["url"].rsplit("/", 1)[-1], url=archive["url"],
                             sha256=req.sha256 if req and req.sha256 else sha, size=archive.get("size"),
                             replaces=replaces))
            continue
        wheel = _choose_wheel(package.get("wheels", []), tags)
        if wheel is None:
            raise ResolveError(f"{name}=={version} has no wheel for CPython {python.version} on {platform}",
                               hint="build it in a component (outputs: {wheels: ...}) and require it with "
                                    "`component:`")
        index = indexes.get(req.index, "") if req and req.index else DEFAULT_INDEX
        out.append(PyPin(name, version, "index", filename=wheel["url"].rsplit("/", 1)[-1], url=wheel["url"],
                         sha256=wheel["hashes"]["sha256"], size=wheel.get("size"), index=index, replaces=replaces))
    return out


def with_size(pin: PyPin) -> PyPin:
    """The pin with its file's size (an index that does not say it, a PEP 503 HTML page, is
    asked with HEAD): the plan gives big distributions layers of their own by it."""
    if pin.size is not None or not pin.url.startswith(("http://", "https://")):
        return pin


    try:
        response = Http(attempts=2).request("HEAD", pin.url, allow_redirects=True)
        size = int(response.headers.get("Content-Length", "")) if response.ok else None
    except (HttpFailure, ValueError):
        size = None
    return replace(pin, size=size) if size is not None else pin


def replaces_base(req: PyRequirement, version: str) -> bool:
    """Whether a requirement asks for another version of a distribution the base ships (as
    `pip install` would: a URL or git requirement always, a specifier the base's version
    does not satisfy; a bare name or a satisfied specifier keeps the base's)."""
    if req.url or req.git_url:
        return True

    try:
        spec = Requirement(req.text).specifier
    except InvalidRequirement:
        return False
    return bool(str(spec)) and not spec.contains(version, prereleases=True)


def overrides_over_base(overrides: tuple[str, ...], base: dict[str, str]) -> tuple[tuple[str, ...], set[str]]:
    """`python.overrides` over what the base ships: an override the base's own version meets
    (pre-releases and local builds such as NGC's `2.10.0a0+nv26.1` included) becomes a pin of
    that version, so the base's build stays; one it does not meet replaces the base's (whose
    constraint is dropped). Returns the overrides to resolve with, and the names replaced."""
    out: list[str] = []
    replaced: set[str] = set()
    for text in overrides:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            out.append(text)
            continue
        name = str(canonicalize_name(req.name))
        try:  # the base's METADATA is another party's: a version that is none meets nothing here
            met = name in base and (not str(req.specifier) or req.specifier.contains(base[name], prereleases=True))
        except InvalidVersion:
            met = False  # (refused, naming the base, where its stand-in wheel is made)
        if name not in base:
            out.append(text)
        elif met:
            out.append(f"{name}=={base[name]}" + (f"; {req.marker}" if req.marker else ""))
        else:
            out.append(text)
            replaced.add(name)
    return tuple(out), replaced


def resolve_python(home: Path, python: Python, platform: str, base: ImagePin | None, where: dict[str, str]) -> PythonPin:
    """The closure of `python.requirements` for `platform`, with its files and sha256."""
    machine = machine_of(platform)
    read = base is not None and base.dists is not None
    base_dists = dict(base.dists or ()) if base else {}
    origins = Origins(where, base_dists, base.ref if base else "scratch")
    by_name = {r.name: r for r in python.requirements}
    components = [r for r in python.requirements if r.component]
    with_deps = [r for r in python.requirements if r.deps and not r.component]
    no_deps = [r for r in python.requirements if not r.deps and not r.component]
    overrides, replaced = overrides_over_base(python.overrides, base_dists)
    # an override the base's own build meets replaces every requirement on that name (uv's
    # --override): a requirement it overrides replaces nothing of the base's
    kept = {n for n in base_dists if n not in replaced and any(o.startswith(f"{n}==") for o in overrides)}
    replacing = {n for n, v in base_dists.items() if n in by_name and n not in kept and replaces_base(by_name[n], v)}
    replacing |= replaced
    python = replace(python, overrides=overrides)
    constraints = [f"{n}=={v}" for n, v in sorted(base_dists.items()) if n not in replacing]
    constraints += list(python.constraints)
    tags = target_tags(python.version, machine)
    indexes = dict(python.indexes)
    pins: dict[str, PyPin] = {}
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    for group, flag in ((with_deps, False), (no_deps, True)):
        if not group:
            continue
        folder = Path(tempfile.mkdtemp(prefix=f".resolve.{os.getpid()}.", dir=home / "tmp"))
        try:
            doc = _compile(home, folder, python, machine, group, constraints, origins, flag,
                           {n: v for n, v in base_dists.items() if n not in replacing})
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        for pin in _pins(doc, tags, indexes, by_name, base_dists, platform, python):
            pins.setdefault(pin.name, pin)
    check_same_release(pins, origins)
    pins = with_shares({name: with_size(pin) for name, pin in pins.items()})
    for r in components:
        pins[r.name] = PyPin(r.name, "", "component", component=r.component or "")
    note = "" if read or base is None else (f"resolved without the distributions of {base.ref}, which could not be "
                                            "read here; `lock` resolves it again where the base is reachable")
    return PythonPin(tuple(pins[n] for n in sorted(pins)), base.digest if read and base else None, note)
