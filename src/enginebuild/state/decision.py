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

from enginebuild.state.memo import PlanMemo
from enginebuild.wire import JsonDoc

UP_TO_DATE = "up to date"
FILES_EDITED = "files edited"
REBUILD = "rebuild"


@dataclass(frozen=True)
class Decision:
    answer: str  # UP_TO_DATE, FILES_EDITED or REBUILD
    declined: str = ""  # REBUILD: why neither cheaper answer could be given
    edited: tuple[str, ...] = ()  # the inputs that changed (FILES_EDITED: only files the image copies)
    doc: JsonDoc | None = field(default=None, compare=False)  # the memo entry read (None: no build is recorded)
    inputs: dict[str, list[int] | None] = field(default_factory=dict, compare=False)  # the stats taken now

    def describe(self) -> str:
        if self.answer == FILES_EDITED:
            return f"{FILES_EDITED}: {', '.join(os.path.basename(p) for p in self.edited)}"
        return self.answer if self.answer == UP_TO_DATE else f"{REBUILD}: {self.declined}"


def decide(memo: PlanMemo, key: str, holds: Callable[[str, str], bool]) -> Decision:
    """`holds(tag, image_id)`: whether the engine holds that image under that tag."""
    doc = memo.read(key)
    if doc is None:
        return Decision(REBUILD, "no finished build of it with these options is recorded")
    inputs = memo.snapshot(doc["inputs"])  # before the files are read: an edit from now on is seen next time
    changed = tuple(memo.changed(doc, inputs))
    if memo.blobs_changed(doc):
        return Decision(REBUILD, "a stored layer changed or is gone (the full path verifies and remakes it)", changed,
                        doc=doc)
    images = doc["result"].get("images") or []
    for image in images:
        missing = next((tag for tag in image["tags"] if not holds(tag, image["id"])), None)
        if missing:
            return Decision(REBUILD, f"the engine does not hold {missing} as last built", changed, doc=doc)
    if not changed:
        return Decision(UP_TO_DATE, doc=doc, inputs=inputs)
    if not images or not all(image.get("edit") for image in images):
        return Decision(REBUILD, f"changed: {_names(changed)}; no edit record to remake it from", changed, doc=doc)
    outside = [p for p in changed if not all(p in image["edit"].get("only_copied", ()) for image in images)]
    if outside:
        return Decision(REBUILD, f"changed, and not only files it copies: {_names(outside)}", changed, doc=doc)
    return Decision(FILES_EDITED, edited=changed, doc=doc, inputs=inputs)


def _names(paths: tuple[str, ...] | list[str]) -> str:
    shown = [os.path.basename(p.rstrip("/")) or p for p in paths[:3]]
    return ", ".join(shown) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
