"""`python:` checks that begin with the same imports, run in one container that imports those
modules once and forks a process per check (each then runs its own code, as `python -c` would).

A check of vLLM imports its model runner first: 10 s or more in a fresh container, where the
check itself takes milliseconds; two such checks in two containers pay it twice. Here the
modules every check of the group imports in its first statements, in the same order, are
imported once; what that import printed is printed again at the head of each check's output,
so a check's output is what it prints alone. Each process is its own: a check's state never
reaches another.

Only a pass is taken from the shared run. A check that did not pass there (a failure, a crash, a
time limit, an output too long to send back, an import the parent could not make) is run again
alone, in a container of its own (checks/behaviour.py), and that run is its verdict: sharing
can make a passing group faster, never a verdict different from the one a fresh container gives.
"""

from __future__ import annotations

import ast
import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass

from enginebuild.oci.engine import EngineApi, EngineError, PrintedTooMuch
from enginebuild.recipe.patchchecks import PatchCheck
from enginebuild.wire import loads

PER_CHECK = 64 << 10  # bytes of a check's output sent back; past it the check runs alone

# argv: the modules to import, then the checks ([code, seconds] each), as JSON
DRIVER = r"""
import base64, importlib, json, os, select, sys, time, traceback
modules, checks, per_check = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
sys.argv = ["-c"]
def captured():
    return os.memfd_create("out"), os.memfd_create("err")
def read(fd):
    os.lseek(fd, 0, 0)
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
saved = os.dup(1), os.dup(2)
sys.stdout.flush(); sys.stderr.flush()
head = captured()
os.dup2(head[0], 1); os.dup2(head[1], 2)
started = time.monotonic()
try:
    for name in modules:
        importlib.import_module(name)
    ok = True
except BaseException:
    ok = False
sys.stdout.flush(); sys.stderr.flush()
os.dup2(saved[0], 1); os.dup2(saved[1], 2)
took = time.monotonic() - started
if not ok:
    print(json.dumps({"imported": False}), flush=True)
    sys.exit(0)
prelude = read(head[0]), read(head[1])
def child(code, fds):
    os.dup2(fds[0], 1); os.dup2(fds[1], 2)
    import types
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    status = 0
    try:
        exec(compile(code, "<string>", "exec"), main.__dict__)
    except SystemExit as exc:
        code = exc.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
        if not isinstance(code, int) and code is not None:
            print(code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        status = 1
    try:
        import atexit
        atexit._run_exitfuncs()  # what the interpreter runs as it exits (os._exit skips it)
        sys.stdout.flush(); sys.stderr.flush()
    finally:
        os._exit(status & 0xFF)
running, width, queue = {}, max(1, len(os.sched_getaffinity(0))), list(enumerate(checks))
def report(i, fds, status):
    out, err = read(fds[0]), read(fds[1])
    os.close(fds[0]); os.close(fds[1])
    out, err = prelude[0] + out, prelude[1] + err
    big = len(out) > per_check
    print(json.dumps({"check": i, "status": status, "big": big,
                      "out": "" if big else base64.b64encode(out).decode(),
                      "err": base64.b64encode(err[-4096:]).decode()}), flush=True)
while queue or running:
    while queue and len(running) < width:
        i, (code, seconds) = queue.pop(0)
        fds = captured()
        sys.stdout.flush(); sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child(code, fds)
        running[pid] = (i, fds, time.monotonic() + max(0.0, seconds - took))
    time.sleep(0.02)
    for pid, (i, fds, deadline) in list(running.items()):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            del running[pid]
            report(i, fds, os.waitstatus_to_exitcode(status))
        elif time.monotonic() > deadline or os.fstat(fds[0]).st_size + os.fstat(fds[1]).st_size > per_check * 16:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            del running[pid]
            report(i, fds, None)
sys.stdout.flush(); sys.stderr.flush()
os._exit(0)  # every verdict is sent: tearing down an interpreter that imported the engine takes seconds
"""


@dataclass(frozen=True)
class Shared:
    """What one check did in the shared run: its exit status (None: stopped) and output."""

    status: int | None
    out: bytes
    err: bytes
    big: bool


def leading_imports(code: str) -> list[str]:
    """The modules the code's first statements import (`import a.b`, `from a.b import c`), in
    order, up to its first statement of another kind; none for code Python cannot parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            names += [alias.name for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom) and statement.level == 0 and statement.module:
            names.append(statement.module)
        else:
            break
    return names


def common_imports(checks: list[PatchCheck]) -> list[str]:
    """The modules every check imports first, in the same order (the longest common prefix)."""
    lists = [leading_imports(c.python or "") for c in checks]
    common: list[str] = []
    for names in zip(*lists, strict=False):
        if len(set(names)) != 1:
            break
        common.append(names[0])
    return common


def groups(checks: list[PatchCheck]) -> list[list[PatchCheck]]:
    """The checks that may share an import: `python:` checks with the same environment and needs,
    two or more, whose first statements import the same modules."""
    by: dict[tuple[object, ...], list[PatchCheck]] = {}
    for check in checks:
        if check.python is not None:
            by.setdefault((check.env, check.needs), []).append(check)
    return [group for group in by.values() if len(group) > 1 and common_imports(group)]


def run_shared(engine: EngineApi, tag: str, group: list[PatchCheck], python: Sequence[str],
               gpus: bool) -> dict[int, Shared]:
    """Each check of `group` (by its index) that the shared run reached; empty where it could not run."""
    modules = common_imports(group)
    argv = [*python, "-c", DRIVER, json.dumps(modules),
            json.dumps([[c.python, c.timeout_s] for c in group]), str(PER_CHECK)]
    try:
        status, out, _ = engine.run_limited(tag, argv, dict(group[0].env), sum(c.timeout_s for c in group),
                                            gpus=gpus)
    except (PrintedTooMuch, EngineError):
        return {}
    if status != 0:
        return {}
    found: dict[int, Shared] = {}
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            event = loads(line)
            if not isinstance(event, dict) or "check" not in event:
                continue
            index = int(event["check"])
            said = event["status"]
            found[index] = Shared(None if said is None else int(said), base64.b64decode(str(event["out"])),
                                  base64.b64decode(str(event["err"])), bool(event["big"]))
        except (ValueError, TypeError, KeyError):
            continue
    return {i: s for i, s in found.items() if 0 <= i < len(group)}
