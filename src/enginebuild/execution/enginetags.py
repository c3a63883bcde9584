"""The engine tags a store made (its chain and component images), kept as records, so that `gc`
removes only its own: an engine several stores share (two users, two recipe repositories, CI
jobs with their own homes) keeps the tags the others made and still use."""

from __future__ import annotations

import re

from enginebuild.io.store import Store

KIND = "engine-tags"
_KEY = re.compile(r"[0-9a-f]{64}")


def made(store: Store, ref: str) -> None:
    """This store made (or took over) the engine's tag `ref` (REPO:KEY)."""
    tag = ref.rpartition(":")[2]
    if _KEY.fullmatch(tag):
        store.put_record(KIND, tag, {"ref": ref})


def forget(store: Store, ref: str) -> None:
    """The tag is gone from the engine."""
    tag = ref.rpartition(":")[2]
    if _KEY.fullmatch(tag):
        store.remove_record(KIND, tag)


def ours(store: Store, ref: str) -> bool:
    tag = ref.rpartition(":")[2]
    if not _KEY.fullmatch(tag):
        return False
    record = store.record(KIND, tag)
    return record is not None and record.get("ref") == ref
