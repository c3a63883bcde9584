"""Atomic file replacement and advisory file locks.

A reader sees either the old file or the new one, never a torn one: the new content
is written to a temporary file in the same folder, fsynced, then renamed over the old.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
import tempfile
import time
from pathlib import Path


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temporaries(folder: Path, older_than_s: float = 0.0) -> None:
    """Temporary files left by a killed writer are never read; tidy them under the lock."""
    if not folder.is_dir():
        return
    now = time.time()
    for tmp in folder.glob(".*.tmp"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime >= older_than_s:
                tmp.unlink()


@contextlib.contextmanager
def file_lock(path: Path, what: str, *, quiet: bool = False):
    """Hold an exclusive lock; say so when another process holds it and we wait.

    The lock is an flock on a file that is never deleted, so a killed holder leaves
    nothing stale behind: the kernel releases the lock with the process.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            if not quiet:
                print(f"waiting for another enginebuild process that holds the lock on {what} ...",
                      file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
