"""`python -m enginebuild ARGS` in the test's own process: the same entry point (`cli.console`: the
recipe repository found from the folder, the no-op and file-edit answers, then the verb), run in
the call's folder with the call's environment, stdin, stdout and stderr, and everything the process
holds put back afterwards (folder, environment, streams, signal handlers, argv, settings).

What a test gains: no child process (a fork and an interpreter's worth of state per call), and the
collaborators passed in: an engine or a registry client in memory (tests/helpers/memengine.py,
memregistry.py) to run the build loop with no Docker engine. What it gives up: a process of its own.
A test of signals, of two commands at once, of what another process sees (stdin a terminal, a
secret in the environment of a child) keeps `run_cli`'s child process."""
from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from pathlib import Path


@contextlib.contextmanager
def _as_the_call(cwd: Path, env: dict[str, str] | None):
    from enginebuild.errors import command, set_command
    from enginebuild.settings import reset_settings

    saved = (os.getcwd(), dict(os.environ), sys.argv, sys.stdin, sys.stdout, sys.stderr, command())
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    os.chdir(cwd)
    os.environ.update(env or {})
    reset_settings()
    try:
        yield
    finally:
        folder, environ, sys.argv, sys.stdin, sys.stdout, sys.stderr, name = saved
        os.chdir(folder)
        os.environ.clear()
        os.environ.update(environ)
        for number, handler in handlers.items():
            signal.signal(number, handler)
        set_command(name)
        reset_settings()


def run_in_process(args, cwd: Path, env: dict[str, str] | None = None, input: str | None = None,
                   docker=None, registries=None, timeout: float | None = None) -> subprocess.CompletedProcess:
    """As conftest.run_cli, in this process: a CompletedProcess with the exit code and what the
    command printed. `timeout` is taken for run_cli's sake and not enforced: a command that hangs
    hangs the test (one that might is a test for run_cli's child process)."""
    from enginebuild.cli import console

    argv = [str(a) for a in args]
    assert "ENGINEBUILD_FAULT" not in {**os.environ, **(env or {})}, \
        "an injected fault may kill the process it runs in: run_cli gives it a child process"
    out, err = io.StringIO(), io.StringIO()
    with _as_the_call(Path(cwd), env):
        sys.argv = ["enginebuild", *argv]
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(input or ""), out, err
        try:
            console(name=None, docker=docker, registries=registries)
            code = 0
        except SystemExit as end:
            code = _exit_code(end.code, err)
    proc = subprocess.CompletedProcess(["enginebuild", *argv], code, out.getvalue(), err.getvalue())
    if code in (0, 1, 2):
        assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _exit_code(code: object, err: io.StringIO) -> int:
    """SystemExit's code as an interpreter turns it into an exit status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=err)
    return 1
