"""Remembering a finished build, so a run with nothing changed answers in milliseconds.

After `image` succeeds, the image ID of each platform is stored with the (mtime, size,
inode) of every file the plan read: the spec chain, the lockfile, every file the image
copies, every patch, build script and source folder, the settings and enginebuild's own
templates. The stats are taken before the build reads the files (an edit while it runs is seen
next time). The next run stats those files; if none changed, it needs neither YAML,
templates nor hashing, only a question to the engine per platform. A file written within
the last seconds (whose time stamp cannot be trusted to differ from a later edit) counts as
changed next time: a file the image copies is then hashed again (fastedit.py), anything else
means a full plan.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from enginebuild.settings import settings
from enginebuild.wire import JsonDoc

MEMO_FORMAT = 2  # the memo's own layout
TOOL = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the enginebuild package answering
RACY_SECONDS = 2.0
UNKNOWN = [0, 0, 0, 0]  # the stat recorded for a file written within RACY_SECONDS: never matches


def _stat(path: str) -> list[int] | None:
    try:
        st = os.lstat(path)  # a file swapped for a symlink is a change, whatever the link points to
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino, st.st_mode]  # a chmod changes a file's mode in the image


ALL_PARTS = ("components", "files", "overlays", "python", "steps", "system")


@dataclass(frozen=True)
class RunOptions:
    """The options of an `image` run that shape what it builds: the one description the full
    path stores its memo under and the fast paths look it up by (plan/image.Options.run_options)."""

    build_args: tuple[tuple[str, str], ...] = ()
    on: str | None = None
    only: tuple[str, ...] = ALL_PARTS  # sorted
    platforms: tuple[str, ...] = ()  # () for the spec's own

    def answerable(self) -> bool:
        """Options a no-op or a file edit may be answered for (`--platform` aside, all the defaults)."""
        return replace(self, platforms=()) == RunOptions()

    def key(self, root: str | Path, image: str) -> str:
        """What the memo is for: this checkout, this image, these options, the time stamp every
        layer carries (SOURCE_DATE_EPOCH) and the enginebuild at this place. What that enginebuild
        is, is among its inputs: every file of the package is stat'ed with the recipe's
        (tool_paths), so any change to its code means a full plan (whose keys say what its
        writers changed)."""
        options = {"build_args": dict(self.build_args), "on": self.on, "only": list(self.only),
                   "platforms": list(self.platforms)}
        return json.dumps({"v": MEMO_FORMAT, "root": str(root), "image": image, "options": options,
                           "epoch": settings().source_date_epoch, "tool": TOOL}, sort_keys=True)


Stats = dict[str, list[int] | None]  # path (or a stored blob's sha256) -> its stat, None where absent


@dataclass(frozen=True)
class ImageRun:
    """One platform's image as a finished build left it."""

    tags: tuple[str, ...]  # platform-qualified first
    id: str  # the engine's image ID
    edit: JsonDoc  # fastedit.py's record of how to remake its copied files' layers (EditRecord's JSON; {}: none)

    def to_json(self) -> JsonDoc:
        return {"tags": list(self.tags), "id": self.id, "edit": self.edit}


@dataclass(frozen=True)
class RunRecord:
    """What the memo keeps of a finished build: the stat of every input it read, each image
    it made, and the stat of each stored layer those images are made of."""

    key: str
    inputs: Stats
    images: tuple[ImageRun, ...]
    summary: str  # what the no-op answer names: the last tag of each image
    blobs: Stats

    @staticmethod
    def from_json(doc: object, key: str) -> RunRecord | None:
        """A record of this key, or None for anything else (another key, another shape: no answer)."""
        if not isinstance(doc, dict) or doc.get("key") != key or not isinstance(doc.get("result"), dict):
            return None
        result, inputs, blobs = doc["result"], doc.get("inputs"), doc.get("blobs") or {}
        images = result.get("images")
        if not (isinstance(inputs, dict) and isinstance(blobs, dict) and isinstance(images, list)
                and isinstance(result.get("summary"), str)):
            return None
        runs = []
        for image in images:
            if not (isinstance(image, dict) and isinstance(image.get("tags"), list) and image["tags"]
                    and all(isinstance(t, str) for t in image["tags"]) and isinstance(image.get("id"), str)
                    and isinstance(image.get("edit", {}), dict)):
                return None
            runs.append(ImageRun(tuple(image["tags"]), image["id"], image.get("edit", {})))
        return RunRecord(key, inputs, tuple(runs), result["summary"], blobs)

    def to_json(self) -> JsonDoc:
        return {"key": self.key, "inputs": self.inputs, "blobs": self.blobs,
                "result": {"images": [i.to_json() for i in self.images], "summary": self.summary}}


class PlanMemo:
    # only os, json and zlib here: this module is on the no-op fast path (see fastpath.py)
    def __init__(self, home: str | Path):
        self.home = str(home)
        self.folder = os.path.join(str(home), "plans")

    def _file(self, key: str) -> str:
        image = json.loads(key)["image"].replace(":", "--")
        return os.path.join(self.folder, f"{image}-{zlib.crc32(key.encode()):08x}.json")

    def read(self, key: str) -> RunRecord | None:
        """The record of `key` as stored (None: none, or one of another shape)."""
        try:
            with open(self._file(key)) as handle:
                doc = json.load(handle)
        except (OSError, ValueError):
            return None
        return RunRecord.from_json(doc, key)

    def changed(self, record: RunRecord, now: Stats | None = None) -> list[str]:
        """The inputs of a record whose stat differs now (or in the snapshot `now`)."""
        now = self.snapshot(record.inputs) if now is None else now
        return [path for path, recorded in record.inputs.items() if now.get(path) != recorded or recorded == UNKNOWN]

    @staticmethod
    def snapshot(paths: Iterable[str | Path]) -> dict[str, list[int] | None]:
        """The stat of each input, taken before the build reads them: an edit while it runs then
        differs from what is recorded, and the next run builds again."""
        now = time.time()
        inputs: dict[str, list[int] | None] = {}
        for path in sorted({str(p) for p in paths}):
            st = _stat(path)
            if st is not None and now - st[0] / 1e9 < RACY_SECONDS:
                st = UNKNOWN  # too fresh to trust its time stamp: counts as changed next time
            inputs[path] = st  # a file that does not exist is a state too
        return inputs

    def store(self, key: str, inputs: Stats, images: Iterable[ImageRun], blobs: Iterable[str] = ()) -> None:
        """`blobs`: the sha256 of every stored layer the image is made of. Their stats are kept too
        (written by enginebuild, never racy): a layer damaged or removed in the store since means
        no answer from the memo, and the full path verifies and makes it again."""
        from enginebuild.io.files import write_atomic  # not on the no-op path, which only reads

        stats = {sha: _stat(self.blob_path(sha)) for sha in sorted(set(blobs))}
        runs = tuple(images)
        record = RunRecord(key, inputs, runs, ", ".join(run.tags[-1] for run in runs), stats)
        write_atomic(Path(self._file(key)), json.dumps(record.to_json()).encode())

    def blob_path(self, sha: str) -> str:
        return os.path.join(self.home, "cas", "sha256", sha[:2], sha)

    def blobs_changed(self, record: RunRecord) -> bool:
        return any(_stat(self.blob_path(sha)) != stat for sha, stat in record.blobs.items())


def tool_paths() -> list[Path]:
    """enginebuild's own code (every module and template of the package): the tool is an input."""
    package = Path(__file__).resolve().parents[1]
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)  # templates: listed above
