"""What a glob or folder of `files:` names on disk: one function for the spec reader and for
the file-edit path (fastedit.py), which lists a changed folder again to know whether the
image's set of files changed or only their bytes."""

from __future__ import annotations

from pathlib import Path


def listed(kind: str, folder: Path, pattern: str) -> list[Path]:
    """The files of a `files:` glob (`pattern` in `folder`) or folder (every file below it), sorted."""
    if kind == "glob":
        return sorted(p for p in folder.glob(pattern) if p.is_file())
    return sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink())
