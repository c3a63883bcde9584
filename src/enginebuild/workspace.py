"""A checkout of a recipe repository: its catalogue, lockfiles, and the machine's store."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from enginebuild.atomic import file_lock, remove_stale_temporaries
from enginebuild.errors import UserError
from enginebuild.home import home


@dataclass
class Workspace:
    root: Path
    _specs: dict = field(default_factory=dict)

    @cached_property
    def catalog(self):
        from enginebuild.catalog import Catalog  # imported on use: a no-op `image` never loads a spec

        return Catalog(self.root)

    @cached_property
    def home(self) -> Path:
        return home()

    def spec(self, name: str):
        """The image's spec, validated and linted (warnings go to stderr once)."""
        if name not in self._specs:
            from enginebuild.lints import lint_spec

            spec = self.catalog.load(name)
            for warning in lint_spec(spec):
                print(warning, file=sys.stderr)
            self._specs[name] = spec
        return self._specs[name]

    def lock(self, name: str):
        from enginebuild.lockfile import read_lock

        return read_lock(self.root, name)

    def buildable(self) -> list:
        return [n for n in self.catalog.names() if not self.spec(n).abstract]

    def select(self, names, *, all_when_empty: bool = True) -> list:
        if names:
            for name in names:
                spec = self.spec(name)
                if spec.abstract:
                    raise UserError(f"{spec.file}: {name} is abstract (a shared definition other images extend); "
                                    "it has no lock and is not built on its own")
            return list(dict.fromkeys(names))
        if all_when_empty:
            return self.buildable()
        raise UserError("name at least one image")

    def state_lock(self, what: str = "this checkout's lockfiles"):
        """Serialises commands that write lockfiles or push records in this checkout."""
        lock = file_lock(self.root / ".enginebuild" / "lock", what)
        return _Tidy(lock, self.root / "lockfiles")


class _Tidy:
    def __init__(self, lock, folder: Path):
        self.lock, self.folder = lock, folder

    def __enter__(self):
        self.lock.__enter__()
        remove_stale_temporaries(self.folder)
        return self

    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)
