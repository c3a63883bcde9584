"""Layers the checks that read an image's bytes have nothing to read in: a small layer of
directories and regular files, none an ELF object, none named as a shared library, no link, no
whiteout but that of a `.pyc` in a `__pycache__` folder (a layer of patched Python files and
the stale bytecode it removes, scripts, the manifest). The image's kernel and
runtime-closure verdicts hold for every image that differs from it only in such layers, so the
verdict recorded in the registry cache (substitutes.py) is keyed by the other layers: a fresh
runner that writes only a layer of patched files takes the verdict of the run that read the
rest, instead of fetching every layer to read them again.

Judged from the bytes where this store holds them (kept per blob), else as the cache's
description of the layer says (written from the bytes where it was made)."""

from __future__ import annotations

import re
import tarfile

from enginebuild.io.store import Store

RECORD = "check-inert"
LIMIT = 16 << 20  # bytes: a larger layer is read by the checks, never judged inert
_LIBRARY = re.compile(r"\.so(\.[0-9][0-9.]*)?$")


def inert(store: Store, sha: str) -> bool | None:
    """Whether the stored layer blob `sha` is one the checks have nothing to read in; None when
    neither its bytes nor a description of it are here."""
    kept = store.record(RECORD, sha)
    if kept is not None:
        return kept.get("inert") is True
    if not store.has(sha):
        return None
    path = store.path(sha)
    judged = path.stat().st_size <= LIMIT and _only_plain_files(str(store.verified(sha, "layer")))
    store.put_record(RECORD, sha, {"inert": judged})
    return judged


def said(store: Store, sha: str) -> None:
    """Keep a description's word that the blob `sha` is inert (a substituted layer's)."""
    if store.record(RECORD, sha) is None:
        store.put_record(RECORD, sha, {"inert": True})


def _only_plain_files(tar_path: str) -> bool:
    with tarfile.open(tar_path, "r:") as tar:
        for member in tar:
            base = member.name.rstrip("/").rsplit("/", 1)[-1]
            if member.isdir() and not base.startswith(".wh."):
                continue
            if _stale_bytecode(member):
                continue
            if not member.isreg() or base.startswith(".wh.") or _LIBRARY.search(base):
                return False
            handle = tar.extractfile(member)
            if handle is None or handle.read(4) == b"\x7fELF":
                return False
    return True


def _stale_bytecode(member: tarfile.TarInfo) -> bool:
    """An empty whiteout of a `.pyc` in a `__pycache__` folder (the layer of patched files removes
    stale bytecode): no check reads bytecode, and no library or kernel is named so."""
    parts = member.name.rstrip("/").split("/")
    return (member.isreg() and member.size == 0 and len(parts) >= 2 and parts[-2] == "__pycache__"
            and parts[-1].startswith(".wh.") and parts[-1].endswith(".pyc") and parts[-1] != ".wh..wh..opq")
