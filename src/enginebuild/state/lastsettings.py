"""The `--set` values an image was last built with on this machine: a push given none, of an image
whose last build had some, is told which (it pushes the image its inputs make, and those
values change the inputs)."""

from __future__ import annotations

import hashlib

from enginebuild.io.store import Store

KIND = "build-settings"


def _key(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def remember_settings(store: Store, name: str, overrides: tuple[str, ...]) -> None:
    store.put_record(KIND, _key(name), {"image": name, "set": list(overrides)})


def last_settings(store: Store, name: str) -> list[str]:
    """The --set values of the image's last build here ([] for none, or none known)."""
    record = store.record(KIND, _key(name)) or {}
    given = record.get("set")
    return [str(v) for v in given] if record.get("image") == name and isinstance(given, list) else []
