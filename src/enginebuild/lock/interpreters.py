"""Which interpreter and machine an environment has, from what the lock and the base say (the
standard library only: the planner asks without loading the resolver)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from enginebuild.core.platforms import Platform

if TYPE_CHECKING:
    from enginebuild.recipe.model import Python

def machine_of(platform: str) -> str:
    """What `uname -m` says on `platform` (Python's `platform_machine`)."""
    return Platform.parse(platform).machine


def interpreter_version(system: object, base: object) -> tuple[str, str] | None:
    """(major.minor, what says so) of the environment's python3: the Debian interpreter its
    system packages install (python3.N), else the base's PYTHON_VERSION; None when neither says."""
    for deb in getattr(system, "packages", ()) or ():
        match = re.fullmatch(r"python3\.(\d+)(?:-minimal)?", deb.name)
        if match:
            return f"3.{match.group(1)}", f"its system packages install {deb.name} {deb.version}"
    for name, value in getattr(base, "env", ()) or ():
        match = re.fullmatch(r"(3\.\d+)(?:\.\d+)?.*", value) if name == "PYTHON_VERSION" else None
        if match:
            return match.group(1), f"its base sets PYTHON_VERSION={value}"
    return None


def interpreter_mismatch(python: Python, system: object, base: object) -> str | None:
    """Why `python.version` cannot be the runtime's interpreter, or None."""
    found = interpreter_version(system, base)
    if found is None or found[0] == python.version or not python.site_packages.startswith("/usr/"):
        return None
    version, because = found
    return (f"python.version is {python.version}, but the interpreter here is Python {version} ({because}): "
            f"packages would go to {python.site_packages}, where Python {version} never looks")
