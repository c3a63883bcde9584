"""The one decision behind every answer of `image`: given what a run asks (its memo key) and the
records a finished build left (the plan memo, state/memo.py) and the engine's answer for each tag,
the image is up to date, or only files it copies were edited (which), or it must be rebuilt, and
then why the cheaper answers were declined.

The no-op (fastpath.py) and the file edit (fastedit.py) are the cheap ways to act on this
decision; the full build (usecases/building.py) says its reason; `plan` shows it. Standard library
and the memo only: it runs on the no-op path, before anything else loads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from enginebuild.state.memo import PlanMemo, RunRecord, Stats

UP_TO_DATE = "up to date"
FILES_EDITED = "files edited"
REBUILD = "rebuild"

@dataclass(frozen=True)
class UpToDate:
    """Nothing the build read changed, and the engine holds every tag as last built."""

    doc: RunRecord = field(compare=False)  # the memo's record the answer is read from
    inputs: Stats = field(default_factory=dict, compare=False)
    answer: ClassVar[str] = UP_TO_DATE

    def describe(self) -> str:
        return UP_TO_DATE


@dataclass(frozen=True)
class FilesEdited:
    """Only files the image copies changed: fastedit.py remakes their layers from the record."""

    edited: tuple[str, ...]  # those files
    doc: RunRecord = field(compare=False)
    inputs: Stats = field(default_factory=dict, compare=False)
    answer: ClassVar[str] = FILES_EDITED

    def describe(self) -> str:
        return f"{FILES_EDITED}: {', '.join(os.path.basename(p) for p in self.edited)}"


@dataclass(frozen=True)
class Rebuild:
    """The full path: why neither cheaper answer could be given."""

    declined: str
    edited: tuple[str, ...] = ()  # the inputs that changed, where a build is recorded
    doc: RunRecord | None = field(default=None, compare=False)  # None: no build is recorded
    answer: ClassVar[str] = REBUILD

    def describe(self) -> str:
        return f"{REBUILD}: {self.declined}"


Decision = UpToDate | FilesEdited | Rebuild


def decide(memo: PlanMemo, key: str, holds: Callable[[str, str], bool]) -> Decision:
    """`holds(tag, image_id)`: whether the engine holds that image under that tag."""
    doc = memo.read(key)
    if doc is None:
        return Rebuild("no finished build of it with these options is recorded")
    inputs = memo.snapshot(doc.inputs)  # before the files are read: an edit from now on is seen next time
    changed = tuple(memo.changed(doc, inputs))
    if memo.blobs_changed(doc):
        return Rebuild("a stored layer changed or is gone (the full path verifies and remakes it)", changed, doc)
    images = doc.images
    for image in images:
        missing = next((tag for tag in image.tags if not holds(tag, image.id)), None)
        if missing:
            return Rebuild(f"the engine does not hold {missing} as last built", changed, doc)
    if not changed:
        return UpToDate(doc, inputs)
    if not images or not all(image.edit for image in images):
        return Rebuild(f"changed: {_names(changed)}; no edit record to remake it from", changed, doc)
    outside = [p for p in changed if not all(p in image.edit.get("only_copied", ()) for image in images)]
    if outside:
        return Rebuild(f"changed, and not only files it copies: {_names(outside)}", changed, doc)
    return FilesEdited(changed, doc, inputs)


def _names(paths: tuple[str, ...] | list[str]) -> str:
    shown = [os.path.basename(p.rstrip("/")) or p for p in paths[:3]]
    return ", ".join(shown) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
