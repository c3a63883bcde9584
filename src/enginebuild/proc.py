"""The one wrapper through which enginebuild runs other programs (git, docker).

A failure raises with the command, its exit code and what it printed, so nothing is
lost; a missing program is a clear usage error, not a traceback.
"""
from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass

from enginebuild.errors import EngineBuildError, ToolMissing


@dataclass
class Result:
    args: list
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
    def __init__(self, result: Result, what: str | None = None):
        tail = (result.err or result.out).strip().splitlines()[-20:]
        message = f"{what or 'command failed'}: `{shlex.join(map(str, result.args))}` exited {result.returncode}"
        if tail:
            message += "\n    " + "\n    ".join(tail)
        super().__init__(message)
        self.result = result


def run(args, *, check: bool = True, what: str | None = None, env: dict | None = None,
        input: bytes | None = None, cwd=None, timeout: float | None = None, stdin=None) -> Result:
    args = [str(a) for a in args]
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    try:
        proc = subprocess.run(args, input=input, stdin=stdin, capture_output=True, env=full_env, cwd=cwd,
                              timeout=timeout, check=False)
    except FileNotFoundError:
        raise ToolMissing(f"`{args[0]}` is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise EngineBuildError(f"{what or args[0]}: `{shlex.join(args)}` did not finish in {timeout}s") from None
    result = Result(args, proc.returncode, proc.stdout, proc.stderr)
    if check and proc.returncode != 0:
        raise CommandFailed(result, what)
    return result
