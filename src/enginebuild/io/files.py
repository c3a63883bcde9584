"""Atomic files, mutexes and temporary files that a killed run cannot leave behind for long.

- `write_atomic`: a reader sees the old file or the new one, never a torn one (temporary
  file in the same folder, fsync, rename, fsync of the folder).
- `mutex`: an exclusive flock on a file that is never deleted; the kernel releases it with
  the process, so a killed holder leaves nothing stale. Says so when it has to wait.
- `temp_path`: temporary names carry the owner's pid (`.NAME.<pid>.<rand>.part`), so
  `sweep` (run at start-up) removes exactly those whose owner is gone.
- A full disk is a clear error that leaves no partial file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, BinaryIO

from enginebuild.errors import EngineBuildError
from enginebuild.io import faults

MEMORY_TMP = Path("/dev/shm")  # memory-backed temporaries (layerkinds/installer.py stages wheels there when they fit)
_OWNED = re.compile(r"\.(?P<pid>\d+)\.[0-9a-f]{8}\.(?:part|tmp|d)$")


class DiskFull(EngineBuildError):
    """No space left where enginebuild writes; nothing partial was kept."""


def image_mode(st_mode: int) -> int:
    """The one rule for a file's mode in a layer enginebuild writes: 0755 when any execute bit
    is set, else 0644 (owner, time and other bits come from the plan, never the host)."""
    return 0o755 if st_mode & 0o111 else 0o644


def disk_full(path: Path, exc: OSError) -> DiskFull:
    return DiskFull(f"no space left on the device holding {path} ({exc.strerror}); nothing partial was kept",
                    hint="free some space (or set ENGINEBUILD_HOME to a larger disk) and run the command again")


def temp_path(folder: Path, stem: str, suffix: str = "part") -> Path:
    """A temporary name in `folder` that says which process owns it."""
    return Path(folder) / f".{stem}.{os.getpid()}.{secrets.token_hex(4)}.{suffix}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(folder: Path, *, recursive: bool = False, own: bool = False) -> int:
    """Remove temporaries whose owning process is gone (with `own`, this process's too: it is
    leaving, and a worker thread stopped mid-write cannot remove its own); returns how many."""
    folder = Path(folder)
    if not folder.is_dir():
        return 0
    removed = 0
    candidates = folder.rglob(".*") if recursive else folder.glob(".*")
    for path in list(candidates):
        match = _OWNED.search(path.name)
        if not match or (_alive(int(match.group("pid"))) and not (own and int(match.group("pid")) == os.getpid())):
            continue
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            removed += 1
    return removed


@contextlib.contextmanager
def atomic_writer(path: Path, mode: int = 0o644) -> Iterator[BinaryIO]:
    """Write to a temporary file; on success it replaces `path`, on any failure it is removed."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise disk_full(path, exc) from None
        raise
    tmp = temp_path(path.parent, path.name, "tmp")
    try:
        with open(tmp, "xb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        faults.reached("files.before-rename", path.name)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if exc.errno == errno.ENOSPC:
            raise disk_full(path, exc) from None
        raise
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    with atomic_writer(path, mode) as handle:
        half = len(data) // 2
        handle.write(data[:half])
        faults.reached("files.half-written", path.name)
        handle.write(data[half:])


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def mutex(path: Path, what: str, *, quiet: bool = False,
          say: Callable[[str], None] | None = None, shared: bool = False) -> Iterator[None]:
    """Hold an exclusive lock on `path` (a file never deleted), or with `shared` one that only an
    exclusive holder excludes; say so when another process holds it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    kind = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            if not quiet:
                message = f"waiting for another enginebuild process that holds the lock on {what} ..."
                (say or (lambda text: print(text, file=sys.stderr, flush=True)))(message)
            fcntl.flock(fd, kind)
        yield
    finally:
        os.close(fd)


def opener(path: Path) -> Callable[[], IO[bytes]]:
    """A function that opens `path` for reading bytes, for uploads that may start over."""

    def open_binary() -> IO[bytes]:
        return path.open("rb")

    return open_binary


def write_folder(target: Path, fill: Callable[[Path], None]) -> Path:
    """A folder written whole or not at all: `fill` writes a staging folder beside `target`, which
    then takes its place (what was at `target`, a folder the caller allowed to be replaced, is
    removed only after). Returns the folder's resolved path."""
    target = Path(os.path.abspath(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = temp_path(target.parent, target.name, "d")
    stage.mkdir()
    old = temp_path(target.parent, target.name + "-old", "d")
    try:
        try:
            fill(stage)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:  # named as the folder being written, whichever write met it
                raise disk_full(target.parent, exc) from None
            raise
        if target.exists():
            target.rename(old)
        stage.rename(target)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if old.exists() and not target.exists():
            old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return target
