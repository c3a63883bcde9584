"""Push records: lockfiles/<image>.pushes.json, what was pushed where, at which digest.

Written atomically, and only after the registry confirmed the digest: a failed or killed
push records nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from enginebuild.errors import LockError
from enginebuild.io.files import write_atomic
from enginebuild.wire import JsonDoc


def record_path(root: Path, lock_name: str) -> Path:
    return root / "lockfiles" / f"{lock_name}.pushes.json"


def read_records(root: Path, lock_name: str) -> list[JsonDoc]:
    path = record_path(root, lock_name)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    except ValueError as exc:
        raise LockError(f"lockfiles/{lock_name}.pushes.json: not valid JSON ({exc})",
                        hint=f"restore it with `git checkout -- lockfiles/{lock_name}.pushes.json`") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("pushes"), list):
        raise LockError(f"lockfiles/{lock_name}.pushes.json: malformed")
    return list(doc["pushes"])


def add_record(root: Path, image: str, lock_name: str, record: JsonDoc) -> None:
    pushes = [p for p in read_records(root, lock_name)
              if not (p.get("repository") == record["repository"] and p.get("tag") == record["tag"])]
    pushes.append(record)
    pushes.sort(key=lambda p: (p["repository"], p["tag"]))
    doc = {"image": image, "pushes": pushes}
    write_atomic(record_path(root, lock_name), (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
