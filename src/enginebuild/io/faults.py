"""Named fault points, for tests that must stop enginebuild at an exact place.

`ENGINEBUILD_FAULT=NAME=ACTION[,NAME=ACTION...]` (see settings.py). A point may carry a
detail (the file being written, say): `NAME:DETAIL=ACTION` acts only there, `NAME=ACTION`
everywhere. At `reached(NAME, DETAIL)`:

- `kill`: the process kills itself with SIGKILL, as a power cut or OOM killer would;
- `announce`: writes `$ENGINEBUILD_HOME/faults/NAME` and goes on, so a test can wait for
  that state (a build really running) instead of sleeping;
- `stall`: announces, then waits, so a test can send a signal at that exact point;
- `wait`: announces, then waits until the test removes that file (to change something there).

Without the variable, `reached` costs one dictionary lookup. Standard library only.
"""

from __future__ import annotations

import os
import signal
import time

from enginebuild.settings import settings


def _actions() -> dict[str, str]:
    spec = settings().fault
    if not spec:
        return {}
    out = {}
    for item in spec.split(","):
        name, _, action = item.strip().partition("=")
        if name:
            out[name] = action or "kill"
    return out


def _announce(name: str) -> None:
    folder = settings().home / "faults"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(str(os.getpid()))


def reached(name: str, detail: str = "") -> None:
    actions = _actions()
    if not actions:
        return
    action = actions.get(f"{name}:{detail}") if detail else None
    action = action or actions.get(name)
    if action is None:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    _announce(name)
    if action == "stall":
        while True:
            time.sleep(3600)
    while action == "wait" and (settings().home / "faults" / name).exists():
        time.sleep(0.05)
