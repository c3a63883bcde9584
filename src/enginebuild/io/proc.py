"""The one wrapper through which enginebuild runs other programs (git, docker, gpgv, uv, ...).

A failure raises with the command, its exit code and what it printed; a missing program
is a clear usage error. `stream` runs a program whose output is read as it comes (builds),
and stops it (SIGINT, then SIGKILL) when enginebuild is interrupted or fails.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from enginebuild.errors import EngineBuildError, ToolMissing

Args = Sequence[str | Path]


@dataclass
class Result:
    args: list[str]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")


class CommandFailed(EngineBuildError):
    def __init__(self, result: Result, what: str | None = None, redact: tuple[str, ...] = ()):
        text = (result.err or result.out).strip()
        for secret in redact:
            text = text.replace(secret, "[redacted]")
        tail = text.splitlines()[-20:]
        message = f"{what or 'command failed'}: `{shlex.join(result.args)}` exited {result.returncode}"
        if tail:
            message += "\n    " + "\n    ".join(tail)
        super().__init__(message)
        self.result = result


def _environment(env: Mapping[str, str] | None, replace_env: bool) -> dict[str, str] | None:
    if env is None:
        return None
    if replace_env:
        return dict(env)
    full = dict(os.environ)
    full.update(env)
    return full


def run(args: Args, *, check: bool = True, what: str | None = None, env: Mapping[str, str] | None = None,
        replace_env: bool = False, input: bytes | None = None, cwd: Path | str | None = None,
        timeout: float | None = None, stdin: IO[bytes] | None = None, redact: tuple[str, ...] = ()) -> Result:
    argv = [str(a) for a in args]
    try:
        proc = subprocess.run(argv, input=input, stdin=stdin, capture_output=True,
                              env=_environment(env, replace_env), cwd=cwd, timeout=timeout, check=False)
    except FileNotFoundError:
        raise ToolMissing(f"`{argv[0]}` is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise EngineBuildError(f"{what or argv[0]}: `{shlex.join(argv)}` did not finish in {timeout}s") from None
    result = Result(argv, proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise CommandFailed(result, what, redact)
    return result


_LIVE: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Lock()


def stop_all() -> None:
    """Stop every child `stream` started, in any thread: the main thread calls this when it is
    interrupted, so that threads blocked reading a child's output see it end and unwind."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for child in live:
        stop(child)


def stop(proc: subprocess.Popen[bytes], grace_s: float = 1.0) -> None:
    """Ask a child to stop (SIGINT, what Ctrl-C sends: the docker client answers it by asking
    the engine to cancel its build), then make it: some engines let the client wait for the
    cancelled step to end, and a user who pressed Ctrl-C is not kept waiting for that."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


def spawn(args: Args, *, fd: int) -> subprocess.Popen[bytes]:
    """A child whose stdin and stdout are one descriptor (a connection's far end); the caller stops it."""
    argv = [str(a) for a in args]
    try:
        return subprocess.Popen(argv, stdin=fd, stdout=fd, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        raise ToolMissing(f"`{argv[0]}` is not installed or not on PATH") from None


@contextlib.contextmanager
def stream(args: Args, *, env: Mapping[str, str] | None = None, stdin: IO[bytes] | int | None = None,
           cwd: Path | str | None = None, merge_stderr: bool = True) -> Iterator[subprocess.Popen[bytes]]:
    """A running child whose stdout the caller reads; stopped on any exit that is not its own."""
    argv = [str(a) for a in args]
    try:
        proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                                env=_environment(env, False), cwd=cwd)
    except FileNotFoundError:
        raise ToolMissing(f"`{argv[0]}` is not installed or not on PATH") from None
    with _LIVE_LOCK:
        _LIVE.add(proc)
    try:
        yield proc
    finally:
        stop(proc)
        with _LIVE_LOCK:
            _LIVE.discard(proc)
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
