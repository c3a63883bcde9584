"""The model's files as a node sees them, hashed in a container of the served image (sent as
`python3 -c`, the standard library only, as serving/nodeside.py is):

    hash FOLDER      one JSON line: {"files": {PATH: [SIZE, SHA256]}, "errors": [...]}, every regular
                     file under FOLDER (links followed; one that leads nowhere is an error)

Every byte is read at every check: a sum kept from an earlier read would not see a file changed
in place with its time kept.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

CHUNK = 1 << 20


def hashed(folder: str) -> dict[str, object]:
    files: dict[str, list[object]] = {}
    errors = []
    for top, dirs, names in os.walk(folder, followlinks=True):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(top, name)
            rel = os.path.relpath(full, folder)
            try:
                if not os.path.isfile(full):
                    errors.append(f"{rel}: not a regular file (a link that leads nowhere?)")
                    continue
                digest = hashlib.sha256()
                size = 0
                with open(full, "rb") as handle:
                    while chunk := handle.read(CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                files[rel] = [size, digest.hexdigest()]
            except OSError as exc:
                errors.append(f"{rel}: {exc.strerror or exc}")
    return {"files": files, "errors": errors}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "hash":
        print(json.dumps(hashed(sys.argv[2])))
    else:
        sys.exit("usage: hash FOLDER")
