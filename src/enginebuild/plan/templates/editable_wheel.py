"""Run inside a component build (by the builder's own Python) for an `editable` output: asks the
build backend named by the tree's pyproject.toml for an editable wheel (PEP 660's
`build_editable`) of the tree in the working folder, into the folder given as argument.

No isolation: the backend and what the build needs come from the builder environment, as with
`pip install --no-build-isolation -e .`. The wheel points at the tree where it is now, which is
where the image will have it.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any

LEGACY = "setuptools.build_meta:__legacy__"  # what pip uses for a tree that names no backend


def build_system() -> tuple[str, list[str]]:
    if not os.path.exists("pyproject.toml"):
        return LEGACY, []
    with open("pyproject.toml", "rb") as handle:
        raw = handle.read()
    try:
        import tomllib
    except ImportError:  # before 3.11: the two keys, read plainly
        text = raw.decode()
        found = re.search(r'^build-backend\s*=\s*["\']([^"\']+)["\']', text, re.M)
        return (found.group(1) if found else LEGACY), []
    table = tomllib.loads(raw.decode()).get("build-system", {})
    return str(table.get("build-backend") or LEGACY), [str(p) for p in table.get("backend-path", [])]


def main() -> int:
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    name, paths = build_system()
    sys.path[:0] = [os.path.abspath(p) for p in paths]
    module, _, attrs = name.partition(":")
    try:
        backend: Any = importlib.import_module(module)
    except ImportError as exc:
        print(f"enginebuild: the build backend {name} is not installed in the builder ({exc}); "
              "add it to the builder's python requirements", file=sys.stderr)
        return 1
    for attr in filter(None, attrs.split(".")):
        backend = getattr(backend, attr)
    hook = getattr(backend, "build_editable", None)
    if hook is None:
        print(f"enginebuild: the build backend {name} has no build_editable hook (PEP 660): this tree cannot be "
              "installed editable", file=sys.stderr)
        return 1
    wheel = hook(out)
    print(f"enginebuild: editable wheel {wheel} for {os.getcwd()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
