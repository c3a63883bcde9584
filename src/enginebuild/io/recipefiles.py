"""The one rule for reading a file of the recipe repository (a spec, a copied file, a patch,
a build script, a path source): it must lie inside the repository, and every folder on the
way to it and the file itself must be what they are, not symlinks.

The rule is applied at the moment of reading, not before: each folder below the root is
opened with O_NOFOLLOW relative to the one above it, then the file itself, so a path swapped
for a symlink between a check and the read is refused rather than followed. Symlinks the
spec reader allowed (inside the image folder) were resolved when the spec was read; what is
read here is their real path. Standard library only: the file-edit path reads through it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from enginebuild.errors import UserError

_ROOTS: list[str] = []


def set_recipe_root(root: str | os.PathLike[str]) -> None:
    """The recipe repository of this process (set by the catalogue, or the file-edit path)."""
    _ROOTS[:] = [os.path.realpath(root)]


def recipe_root() -> str | None:
    return _ROOTS[0] if _ROOTS else None


class OutsideRecipe(UserError):
    """A recipe file that lies outside the repository or is reached through a symlink."""


def _refuse(path: str, why: str) -> OutsideRecipe:
    return OutsideRecipe(f"{path}: {why}; enginebuild reads only regular files inside the recipe repository, "
                         "never through a symlink",
                         hint="copy the file into the repository instead of linking to it")


def open_recipe_file(path: str | os.PathLike[str], root: str | None = None) -> BinaryIO:
    """`path` opened for reading, under the rule above (root: the recipe root set for this process)."""
    text = os.fspath(path)
    base = root or recipe_root() or os.path.dirname(os.path.abspath(text))
    rel = os.path.relpath(os.path.abspath(text), base)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        raise _refuse(text, f"outside the recipe repository ({base})")
    parts = rel.split(os.sep)
    folder = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            below = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = below
        fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refuse(text, "a symlink on the way, or the file itself is one") from None
        raise
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _refuse(text, "not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_recipe_file(path: str | os.PathLike[str], root: str | None = None) -> bytes:
    with open_recipe_file(path, root) as handle:
        return handle.read()


def is_plain_inside(path: Path, root: str | None = None) -> bool:
    """Whether `path` could be read under the rule now (for listings that skip what they may not read)."""
    try:
        open_recipe_file(path, root).close()
    except (OSError, OutsideRecipe):
        return False
    return True
