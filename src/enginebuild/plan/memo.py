"""Remembering a finished plan, so a run with nothing changed answers in milliseconds.

After `image` succeeds, the final stage's key is stored with the (mtime, size, inode) of
every file the plan read: the spec chain, the lockfile, every file a stage copies, every
patch, source folders, and enginebuild's own templates. The next run stats those files;
if none changed, it needs neither YAML, templates nor hashing, only one question to the
engine. Any change, or a file written within the last seconds (whose time stamp cannot be
trusted to differ from a later edit), means a full plan.
"""
from __future__ import annotations

import json
import os
import time
import zlib

from enginebuild import __version__

RACY_SECONDS = 2.0


def _stat(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]


def memo_key(root, image: str, options: dict) -> str:
    """What the memo is for: this checkout, this image, these options, this enginebuild."""
    return json.dumps({"v": __version__, "root": str(root), "image": image, "options": options}, sort_keys=True)


class PlanMemo:
    # only os, json and zlib here: this module is on the no-op fast path (see fastpath.py)
    def __init__(self, home):
        self.folder = os.path.join(str(home), "plans")

    def _file(self, key: str) -> str:
        image = json.loads(key)["image"]
        return os.path.join(self.folder, f"{image}-{zlib.crc32(key.encode()):08x}.json")

    def lookup(self, key: str) -> dict | None:
        try:
            with open(self._file(key)) as handle:
                doc = json.load(handle)
        except (OSError, ValueError):
            return None
        if doc.get("key") != key:
            return None
        for path, recorded in doc.get("inputs", {}).items():
            if _stat(path) != recorded:
                return None
        return doc.get("result")

    def store(self, key: str, paths, result: dict) -> bool:
        now = time.time()
        inputs = {}
        for path in sorted({str(p) for p in paths}):
            st = _stat(path)
            if st is None or now - st[0] / 1e9 < RACY_SECONDS:
                return False  # too fresh to trust its time stamp; the next run will record it
            inputs[path] = st
        from pathlib import Path

        from enginebuild.atomic import write_atomic

        write_atomic(Path(self._file(key)), json.dumps({"key": key, "inputs": inputs, "result": result}).encode())
        return True


def plan_input_paths(root, spec, templates_dir) -> list:
    """Every file and folder whose change could change the plan of this spec."""
    paths = [root / "images" / name / "image.yaml" for name in spec.chain]
    paths.append(root / "lockfiles" / f"{spec.name}.lock")
    paths += [f.src for f in spec.files]
    paths += [p.path for p in spec.patches]
    sources = []
    if spec.engine:
        if spec.engine.build:
            paths.append(spec.engine.build.script.src)
        sources.append(spec.engine.source)
        sources += [v.source for v in spec.engine.vendor]
    for plugin in spec.plugins:
        paths += [f.src for f in plugin.files] + [p.path for p in plugin.patches]
        sources.append(plugin.source)
    for source in sources:
        if source.kind == "path":
            for dirpath, dirnames, filenames in os.walk(source.path):
                paths.append(dirpath)
                paths += [os.path.join(dirpath, n) for n in dirnames + filenames]
    paths.append(templates_dir)
    paths += sorted(templates_dir.iterdir())
    return paths
