"""`python -m enginebuild ARGS` without paying for the interpreter's start-up and enginebuild's
imports on every call: a single-threaded server process imports the CLI once, then forks a child
per call, which sets the call's folder, environment, stdin, stdout and stderr and runs the same
`__main__` a fresh interpreter would. A child is a process of its own (exit code, signals,
process-global state), so the test sees what a separate `python -m enginebuild` would do.

Protocol on the server's stdin/stdout: one JSON request a line; it answers `pid N` when the child
started and `exit CODE` when it ended."""
from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

PRELOAD = ("enginebuild.cli", "enginebuild.commands", "enginebuild.usecases.building", "enginebuild.plan.image",
           "enginebuild.recipe.catalog", "enginebuild.lock.resolve", "enginebuild.patches.check",
           "enginebuild.execution.executor", "enginebuild.publish.changed", "enginebuild.kernels.image")


def _child(request: dict) -> None:
    """In the forked child: become the call's process (with `limit_as`, an address space of at most
    that many bytes, as a fresh interpreter started under that limit would have)."""
    if request.get("limit_as"):
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (request["limit_as"], request["limit_as"]))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in ((0, request["stdin"], os.O_RDONLY), (1, request["stdout"], os.O_WRONLY),
                            (2, request["stderr"], os.O_WRONLY)):
        handle = os.open(path, flags)
        os.dup2(handle, fd)
        os.close(handle)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams, never closed
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    sys.argv = ["enginebuild", *request["args"]]
    # an exit (SystemExit, or the end of the module) ends the process as an interpreter ends it
    # (non-daemon threads joined, atexit handlers run, streams flushed), then without tearing the
    # interpreter's modules down one by one, which takes longer than most calls; anything else it
    # raises ends it as it ends an interpreter (serve() does not catch it): a traceback and 1
    try:
        runpy.run_module("enginebuild", run_name="__main__", alter_sys=True)
        code: object = 0
    except SystemExit as stop:
        code = stop.code
    threading._shutdown()  # type: ignore[attr-defined]
    import atexit

    atexit._run_exitfuncs()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def serve() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from enginebuild import cli

    cli.build_parser()  # and every verb's module (each call parses its command line with them all)
    out = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        out.write(f"pid {pid}\n")
        out.flush()
        _, status, usage = os.wait4(pid, 0)  # and the child's own peak memory
        out.write(f"exit {os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}\n")
        out.flush()


class Zygote:
    """One server per test process, started on first use."""

    def __init__(self, root: Path):
        self.root = root
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def _server(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            env = {**os.environ, "PYTHONPATH": f"{self.root / 'src'}{os.pathsep}{self.root / 'tests'}"}
            self.proc = subprocess.Popen([sys.executable, "-c", "from helpers.zygote import serve; serve()"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        return self.proc

    def run(self, args: list[str], cwd: Path, env: dict, timeout: float, input: str | None,
            limit_as: int | None = None) -> subprocess.CompletedProcess:
        """The call's result; its `peak_rss_kib`: the child's peak resident memory."""
        with self.lock, tempfile.TemporaryDirectory(prefix="eb-cli-") as folder:
            paths = {name: os.path.join(folder, name) for name in ("stdin", "stdout", "stderr")}
            Path(paths["stdin"]).write_text(input or "")
            Path(paths["stdout"]).touch()
            Path(paths["stderr"]).touch()
            server = self._server()
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write(json.dumps({"args": args, "cwd": str(cwd), "env": env, "limit_as": limit_as, **paths}) + "\n")
            server.stdin.flush()
            pid = int(server.stdout.readline().split()[1])
            ended: list[str] = []
            reader = threading.Thread(target=lambda: ended.append(server.stdout.readline()), daemon=True)
            reader.start()
            reader.join(timeout)
            if reader.is_alive():
                os.kill(pid, 9)
                reader.join()
                raise subprocess.TimeoutExpired(["enginebuild", *args], timeout)
            _, code, rss = ended[0].split()
            done = subprocess.CompletedProcess(["enginebuild", *args], int(code), Path(paths["stdout"]).read_text(),
                                               Path(paths["stderr"]).read_text())
            done.peak_rss_kib = int(rss)  # type: ignore[attr-defined]
            return done

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
