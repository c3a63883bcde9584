"""Which patches of a component's stack go into its build, and which are applied as files.

A patch whose every change is a change of a file the component's build installs verbatim (the
same bytes in the unpatched source and in the unpatched output, learned from the bytes of a build
of the same recipe: layerkinds/verbatim.py) does not enter the build: the component is built
without it, once, and the patched files become a layer of their own (layerkinds/patchedfiles.py).
A patch that adds, deletes, renames or changes the mode of a file, a binary patch, or one that
touches a file the build does not install verbatim goes into the build; so does a patch that
shares a file with a patch that goes into the build (its change applies on top of the other's).

Whether a build installs a file verbatim is a fact committed beside the lock
(lock/routesfile.py: `lockfiles/<lock>.routes.json`), so the routes, and every key, are a
function of the checkout. A file the routes file does not know yet is routed as files (the rule
`plan` prints: "not yet in the routes file"); `image` learns it from the build of the component
without that patch before it builds the image (usecases/learning.py), writes it there, and
plans again from the files: a file found not verbatim puts its patch into the build.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from enginebuild.recipe.model import PatchRef
from enginebuild.sources.globs import declared_matcher


@dataclass(frozen=True)
class Route:
    patch: str  # its name, relative to patches/
    route: str  # files | build | outside (it reaches none of the declared inputs: in no build)
    why: str  # into the build: the reason; as files: what it writes

    @property
    def as_files(self) -> bool:
        return self.route == "files"

    def line(self, component: str) -> str:
        base = self.patch.rsplit("/", 1)[-1]
        if self.as_files:
            return f"{component}: {base} applied as files ({self.why}); no component build"
        return f"{component}: {base} into the build: {self.why}"

    def to_json(self) -> dict[str, str]:
        return {"patch": self.patch, "route": self.route, "why": self.why}


Facts = Mapping[str, bool]  # source path -> installed verbatim by the build (absent: not known)
FactsReader = Callable[[str], "Facts | None"]  # a recipe key (the build without the patches as files) -> its facts
RoutesReader = Callable[[str], FactsReader]  # a lock's name -> what its routes file says
UNKNOWN = "; not yet in the routes file: `image` learns it from its build first"


def no_facts(recipe_key: str) -> Facts | None:
    return None


def no_routes(lock_name: str) -> FactsReader:
    return no_facts


def _why_not(patch: PatchRef, facts: Facts | None) -> str | None:
    """Why the patch cannot be applied as files, or None."""
    for change in patch.patch.files:
        path = change.path
        if change.old_path is None:
            return f"{path} is a new file"
        if change.new_path is None:
            return f"{path} is deleted"
        if change.moves:
            return f"{change.old_path} is {'copied' if change.copy else 'renamed'} to {change.new_path}"
        if change.binary is not None:
            return f"{path} changes by a binary patch"
        if change.new_mode is not None and change.new_mode != change.old_mode:
            return f"{path} changes its mode"
        read = read_by_build(path)
        if read:
            return f"{path} {read}"
        if facts is not None and path in facts and not facts[path]:
            return f"{path} is not installed verbatim"
    return None


COMPILED = (".c", ".cc", ".cpp", ".cxx", ".c++", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl", ".inc", ".cl",
            ".s", ".asm", ".f", ".f90", ".rs", ".go", ".zig", ".pyx", ".pxd", ".pxi", ".m", ".mm", ".java", ".kt",
            ".swift", ".proto", ".td", ".ptx", ".metal")
BUILD_FILES = ("CMakeLists.txt", "setup.py", "setup.cfg", "pyproject.toml", "meson.build", "meson_options.txt",
               "Makefile", "GNUmakefile", "makefile", "configure", "configure.ac", "Cargo.toml", "build.rs", "go.mod",
               "BUILD", "BUILD.bazel", "WORKSPACE", "MODULE.bazel", "MANIFEST.in", "build.ninja")
BUILD_SUFFIXES = (".cmake", ".mk", ".bzl", ".gradle", ".am", ".in")


def read_by_build(path: str) -> str:
    """Why a file is one the build reads to make what it installs (its compiled code, its build's
    definition, its requirements), whatever it installs verbatim: a change of it always goes into
    the build. "" for any other file, which is routed by the bytes its build installs."""
    name = path.rsplit("/", 1)[-1]
    if name in BUILD_FILES or name.endswith(BUILD_SUFFIXES):
        return "defines the build"
    if name.lower().endswith(COMPILED):
        return f"is compiled by the build (a .{name.rsplit('.', 1)[-1]} file)"
    if path.startswith("requirements/") or "/requirements/" in path or \
            (name.startswith("requirements") and name.endswith((".txt", ".in"))):
        return "states the build's requirements"
    return ""


def route_patches(patches: tuple[PatchRef, ...], facts: Facts | None, *, inputs: tuple[str, ...] = (),
                  refused: str = "") -> tuple[tuple[PatchRef, ...], tuple[PatchRef, ...], tuple[Route, ...]]:
    """(patches into the build, patches applied as files, each one's route), in stack order.
    `facts`: what the recipe's build installs verbatim (None: not known yet); `inputs`: the
    component's declared inputs (a patch reaching none of them is outside its build either way);
    `refused`: why no patch of this component may be applied as files."""
    declared = declared_matcher(inputs) if inputs else None
    outside = {p.name for p in patches if declared is not None and not any(declared(f.path) for f in p.patch.files)}
    reasons: dict[str, str] = {}
    for patch in patches:
        if patch.name in outside:
            continue
        why = refused or _why_not(patch, facts)
        if why is not None:
            reasons[patch.name] = why
    changed = True
    while changed:  # a patch sharing a file with one that goes into the build goes with it
        changed = False
        into_build = {f.path: p.name for p in patches if p.name in reasons for f in p.patch.files}
        for patch in patches:
            if patch.name in reasons or patch.name in outside:
                continue
            shared = sorted(f.path for f in patch.patch.files if f.path in into_build)
            if shared:
                other = into_build[shared[0]].rsplit("/", 1)[-1]
                reasons[patch.name] = f"{shared[0]} is also changed by {other}, which goes into the build"
                changed = True
    files = tuple(p for p in patches if p.name not in reasons and p.name not in outside)
    build = tuple(p for p in patches if p not in files)
    routes = []
    for patch in patches:
        if patch in files:
            count = len({f.path for f in patch.patch.files})
            size = patch.path.stat().st_size if patch.path.is_file() else 0
            known = facts is not None and all(f.path in facts for f in patch.patch.files)
            checked = "" if known else UNKNOWN
            routes.append(Route(patch.name, "files", f"{count} file{'s' if count != 1 else ''}, {_kb(size)}{checked}"))
        elif patch.name in outside:
            routes.append(Route(patch.name, "outside", "it touches none of the declared inputs"))
        else:
            routes.append(Route(patch.name, "build", reasons[patch.name]))
    return build, files, tuple(routes)


def _kb(size: int) -> str:
    return f"{size / 1024:.1f} KB" if size >= 1024 else f"{size} bytes"

