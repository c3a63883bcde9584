"""Push records: lockfiles/<image>.pushes.json, what was pushed where, at which digest.

Written atomically, and only after the registry confirmed the digest: a failed push
records nothing.
"""
from __future__ import annotations

import json
from pathlib import Path

from enginebuild.atomic import write_atomic
from enginebuild.errors import LockError


def record_path(root: Path, image: str) -> Path:
    return root / "lockfiles" / f"{image}.pushes.json"


def read_records(root: Path, image: str) -> list:
    path = record_path(root, image)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except ValueError as exc:
        raise LockError(f"lockfiles/{image}.pushes.json: not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("pushes"), list):
        raise LockError(f"lockfiles/{image}.pushes.json: malformed")
    return doc["pushes"]


def add_record(root: Path, image: str, record: dict) -> None:
    pushes = [p for p in read_records(root, image)
              if not (p.get("repository") == record["repository"] and p.get("tag") == record["tag"])]
    pushes.append(record)
    pushes.sort(key=lambda p: (p["repository"], p["tag"]))
    doc = {"image": image, "pushes": pushes}
    write_atomic(record_path(root, image), (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
