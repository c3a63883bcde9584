"""What the wheel a component builds needs at run time, read from the component's pinned
source (with its patch stack applied) before anything is built, so that the lock resolves
it with the rest of the closure, with hashes: `requires-from` names requirements files
(`-r` includes followed), a pyproject.toml (its dependencies, or with `#build-system` what its
build requires) or a setup.py whose `setup(install_requires=[...])` is a literal list (read, never
run); without it, the source's pyproject.toml.
The build checks the wheel's own metadata against what was resolved (layerkinds/installer.py).
"""

from __future__ import annotations

import ast
import posixpath
import tomllib

from packaging.requirements import InvalidRequirement, Requirement

from enginebuild.errors import ResolveError
from enginebuild.patches.check import check_stack
from enginebuild.recipe.model import Component, PyRequirement
from enginebuild.sources import Pinned
from enginebuild.sources.base import Context
from enginebuild.sources.trees import SourceTree

MAX_FILES = 32


class PatchedFiles:
    """Files of a source tree as its patch stack leaves them."""

    def __init__(self, comp: Component, tree: SourceTree):
        self.tree = tree
        self.patched = check_stack([p.patch for p in comp.patches], tree).files if comp.patches else {}

    def read(self, path: str) -> bytes | None:
        if path in self.patched:
            return self.patched[path]
        return self.tree.read_many([path])[path]


def requirement_lines(files: PatchedFiles, path: str, what: str, seen: set[str] | None = None) -> list[str]:
    """The requirements of a requirements file, following `-r FILE` (relative to it)."""
    seen = seen if seen is not None else set()
    if path in seen or len(seen) >= MAX_FILES:
        return []
    seen.add(path)
    data = files.read(path)
    if data is None:
        raise ResolveError(f"{what}: {path} is not in the component's source")
    out: list[str] = []
    text = data.decode("utf-8", "replace").replace("\\\n", " ")
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ", "--requirement=")):
            include = line.split("=", 1)[1] if line.startswith("--requirement=") else line.split(None, 1)[1]
            out += requirement_lines(files, posixpath.normpath(posixpath.join(posixpath.dirname(path), include)),
                                     what, seen)
            continue
        if line.startswith("-"):
            continue  # index and constraint options: the spec's python.indexes and constraints say those
        try:
            Requirement(line)
        except InvalidRequirement as exc:
            raise ResolveError(f"{what}: {path}:{number}: not a requirement: {exc}") from None
        out.append(line)
    return out


def pyproject_requirements(files: PatchedFiles, path: str, what: str) -> list[str]:
    """A pyproject.toml's dependencies, or with `#build-system` what its build requires."""
    path, _, part = path.partition("#")
    data = files.read(path)
    if data is None:
        raise ResolveError(f"{what}: the source has no {path} saying what its wheel needs",
                           hint="name its requirements files with `requires-from`, or say `deps: false`")
    try:
        doc = tomllib.loads(data.decode("utf-8", "replace"))
    except tomllib.TOMLDecodeError as exc:
        raise ResolveError(f"{what}: {path} is not valid TOML: {exc}") from None
    if part == "build-system":
        requires = [str(r) for r in (doc.get("build-system") or {}).get("requires") or [] if isinstance(r, str)]
        for line in requires:
            try:
                Requirement(line)
            except InvalidRequirement as exc:
                raise ResolveError(f"{what}: {path}: build-system.requires: not a requirement: {exc}") from None
        return requires
    project = doc.get("project") or {}
    if "dependencies" in (project.get("dynamic") or ()):
        raise ResolveError(f"{what}: {path} declares its dependencies dynamic (computed by its build)",
                           hint="name the requirements files its build reads with `requires-from`")
    return [str(d) for d in project.get("dependencies") or ()]


def setup_requirements(files: PatchedFiles, path: str, what: str) -> list[str]:
    """`install_requires` of a setup.py's `setup(...)` call, when it is a literal list of strings:
    the file is parsed, never run."""
    data = files.read(path)
    if data is None:
        raise ResolveError(f"{what}: {path} is not in the component's source")
    try:
        tree = ast.parse(data.decode("utf-8", "replace"), path)
    except SyntaxError as exc:
        raise ResolveError(f"{what}: {path}:{exc.lineno}: not Python: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (getattr(node.func, "id", None) == "setup"
                                           or getattr(node.func, "attr", None) == "setup"):
            for keyword in node.keywords:
                if keyword.arg != "install_requires":
                    continue
                try:
                    value = ast.literal_eval(keyword.value)
                except ValueError:
                    value = None
                if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                    raise ResolveError(f"{what}: {path}:{keyword.value.lineno}: install_requires is computed, not a "
                                       "list of strings", hint="name a requirements file with `requires-from`")
                for line in value:
                    try:
                        Requirement(line)
                    except InvalidRequirement as exc:
                        raise ResolveError(f"{what}: {path}: install_requires: not a requirement: {exc}") from None
                return list(value)
            return []
    raise ResolveError(f"{what}: {path} has no setup(...) call to read install_requires from")


def wheel_requirements(comp: Component, req: PyRequirement, source: Pinned | None,
                       ctx: Context) -> list[tuple[str, str]]:
    """The requirements of the wheel `comp` builds, as its (pinned) source states them, each with
    the file of the source that states it."""
    what = f"{req.where}: the wheel of component {comp.name}"
    if source is None:
        raise ResolveError(f"{what}: the component has no source to read its requirements from",
                           hint="say `deps: false` and list what it needs as requirements of their own")
    tree = source.tree(ctx)
    files = PatchedFiles(comp, tree)
    out: list[tuple[str, str]] = []
    for path in req.requires_from or ("pyproject.toml",):
        if path.partition("#")[0].endswith(".toml"):
            found = pyproject_requirements(files, path, what)
        elif path.endswith("setup.py"):
            found = setup_requirements(files, path, what)
        else:
            found = requirement_lines(files, path, what)
        out += [(line, path.partition("#")[0]) for line in found if line not in {text for text, _ in out}]
    return out
