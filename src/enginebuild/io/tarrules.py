"""The naming rules every layer enginebuild writes follows: which build leftovers are dropped,
which folders are kept empty, how an entry's name is cleaned. The standard library only: the
spec reader and the planner use them without loading the tar writer."""

from __future__ import annotations

import fnmatch

DROP = (
    "tmp/*", "var/tmp/*", "run/*", "var/log/*", "var/cache/apt/*", "var/lib/apt/lists/*", "root/.cache/*",
    "var/cache/debconf/*-old", "var/lib/dpkg/*-old", "var/cache/ldconfig/aux-cache", "*/__pycache__/*.pyc",
    "*/__pycache__", "var/cache/man/*", "etc/machine-id",
)
KEEP_DIRS = {"tmp", "var/tmp", "run", "var/log"}


def dropped_by(name: str) -> str | None:
    """The clean-up pattern that drops the entry `name` (no leading /), or None."""
    if name.rsplit("/", 1)[-1].startswith(".wh."):
        return None
    return next((pattern for pattern in DROP if fnmatch.fnmatchcase(name, pattern)), None)


def dropped(name: str) -> bool:
    return dropped_by(name) is not None


def clean_name(name: str) -> str:
    while name.startswith("./"):
        name = name[2:]
    return name.lstrip("/").rstrip("/")
