"""Which files each component's build installs verbatim, committed beside the lock.

The route of a patch that only changes files (plan/routes.py) depends on whether the
component's build installs those files verbatim. That is learned from the bytes of a build
(layerkinds/verbatim.py) and written here, `lockfiles/<lock>.routes.json`, so the plan, and
every key, is a function of the checkout: the same on a fresh machine as after a build, the
same on two machines. A path with `true` is installed verbatim, `false` is not, a path not
listed is not known yet (the plan routes its patch as files and `image` learns it before it
builds: usecases/learning.py). An image's plan reads its own file, as it reads its own lock.
Facts are kept per recipe: the component's key without the patches applied as files (it names
the source, the build and its platform), one recipe per component and platform; a recipe the
plan no longer makes is no fact.

The file is read as another party's (it is committed, and may be edited or merged by hand):
its size is bounded, keys are checked as keys and a malformed entry is an error that names
the file and the key, never a fact.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from enginebuild.errors import LockError, command
from enginebuild.io.files import write_atomic

FORMAT = 1
LIMIT = 4 << 20  # a routes file larger than this is not one
ABOUT = "which files each component's build installs verbatim, learned from its bytes: commit this file"
_KEY = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_PLATFORM = re.compile(r"[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?")

Verbatim = Mapping[str, bool]  # source path -> installed verbatim (absent: not known)
VerbatimReader = Callable[[str], "Verbatim | None"]  # a recipe key -> what is known of it


@dataclass(frozen=True)
class Recipe:
    component: str
    platform: str
    key: str  # the component's build without the patches applied as files
    verbatim: dict[str, bool]

    def to_json(self) -> dict[str, object]:
        return {"component": self.component, "platform": self.platform, "recipe": self.key,
                "verbatim": dict(sorted(self.verbatim.items()))}


def routes_path(root: Path, lock_name: str) -> Path:
    return root / "lockfiles" / f"{lock_name}.routes.json"


def read_recipes(path: Path, display: str) -> list[Recipe]:
    """The recipes of one routes file ([] where there is none)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return []
    hint = f"restore it with `git checkout -- {display}`, or delete it: `{command()} image` learns it again"
    if not path.is_file() or size > LIMIT:
        raise LockError(f"{display}: not a routes file (a regular file of at most {LIMIT >> 20} MiB)", hint=hint)
    try:
        doc = json.loads(path.read_bytes())
    except ValueError as exc:
        raise LockError(f"{display}: not valid JSON ({exc})", hint=hint) from None
    return recipes_of(doc, display, hint)


def recipes_of(doc: object, display: str, hint: str) -> list[Recipe]:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("components"), list):
        raise LockError(f"{display}: not an enginebuild routes file (format {FORMAT}, a list of components)",
                        hint=hint)
    out = []
    for n, entry in enumerate(doc["components"]):
        where = f"{display}: components[{n}]"
        if not isinstance(entry, dict) or set(entry) != {"component", "platform", "recipe", "verbatim"}:
            raise LockError(f"{where}: expected the keys component, platform, recipe and verbatim", hint=hint)
        for key, pattern in (("component", _NAME), ("platform", _PLATFORM), ("recipe", _KEY)):
            if not isinstance(entry[key], str) or not pattern.fullmatch(entry[key]):
                raise LockError(f"{where}.{key}: {str(entry[key])[:80]!r} is not a {key}", hint=hint)
        files = entry["verbatim"]
        if not isinstance(files, dict):
            raise LockError(f"{where}.verbatim: expected a mapping of source paths to true or false", hint=hint)
        for name, value in files.items():
            if not _source_path(name) or not isinstance(value, bool):
                raise LockError(f"{where}.verbatim.{name[:120]}: expected a relative source path and true or "
                                "false", hint=hint)
        out.append(Recipe(entry["component"], entry["platform"], entry["recipe"], dict(files)))
    return out


def _source_path(name: object) -> bool:
    return isinstance(name, str) and 0 < len(name) <= 4096 and not name.startswith("/") and "\0" not in name \
        and all(part not in ("", ".", "..") for part in name.split("/"))


def committed(root: Path) -> Callable[[str], VerbatimReader]:
    """What an image's routes file says, per recipe key, read when the plan asks (lock name ->
    reader): an image's plan reads its own file, as it reads its own lock."""

    def for_lock(lock_name: str) -> VerbatimReader:
        path = routes_path(root, lock_name)
        known = {r.key: r.verbatim for r in read_recipes(path, f"lockfiles/{path.name}")}
        return known.get

    return for_lock


def record(root: Path, lock_name: str, learned: Recipe) -> bool:
    """Add what a build learned to the image's routes file, replaced atomically; the recipe it
    replaces for that component and platform is dropped. False when the file already said it."""

    path = routes_path(root, lock_name)
    recipes = read_recipes(path, f"lockfiles/{path.name}")
    old = next((r for r in recipes if (r.component, r.platform) == (learned.component, learned.platform)), None)
    verbatim = {**(old.verbatim if old is not None and old.key == learned.key else {}), **learned.verbatim}
    if old is not None and old.key == learned.key and old.verbatim == verbatim:
        return False
    rest = [r for r in recipes if (r.component, r.platform) != (learned.component, learned.platform)]
    rest.append(Recipe(learned.component, learned.platform, learned.key, verbatim))
    rest.sort(key=lambda r: (r.component, r.platform))
    doc = {"format": FORMAT, "about": ABOUT, "components": [r.to_json() for r in rest]}
    recipes_of(doc, f"lockfiles/{path.name}", "what a build learned is not a recipe")  # never write what cannot be read
    write_atomic(path, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
    return True
