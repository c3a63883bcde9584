"""q. rebuild cost by kind of engine edit, with the component's compiled part declared
(`components.NAME.inputs`) vs without: an engine whose source is the demo's kernel library
(compiled: `kernel.c`, `kernels.h`, the build script) plus a Python launcher (`py/launcher.py`),
with a one-patch stack. Each edit changes the patch (as a DFlash-style fix does), so the
component's source identity stays and only what the patch touches decides; each side is
built once untimed first, then each edit is timed (a full `image`, plan included).
"""
from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

from common import Row, eb, run
from figures import _demo_builder

LAUNCHER = "LAYERS = range(1, 62, 15)\n"
KERNEL_LINE = "/* One kernel unit. The build compiles this file once per unit with -DUNIT=<n>, the way an\n"
KERNEL_NEXT = " * engine build compiles one CUDA kernel per architecture and dtype: real compiler work\n"


def _patch(path: str, old: str, new: str, context: str = "") -> str:
    """A patch of the first line of a file (with the next line as context, when it has one)."""
    count = ",2" if context else ""
    return (f"Subject: tune {path}\nDescription: a bench edit\nUpstream: not forwarded (bench)\n---\n"
            f"--- a/{path}\n+++ b/{path}\n@@ -1{count} +1{count} @@\n-{old}+{new}" + (f" {context}" if context else ""))


def _spec(declared: bool, units: int, salt: str) -> str:
    inputs = '    inputs: ["kernel.c", "kernels.h", "build_kernels.sh"]\n' if declared else ""
    return (f"description: bench edit kinds\nplatform: linux/amd64\nbase: scratch\n{_demo_builder()}"
            "components:\n  engine:\n    source: {path: eng}\n    patches: [bench-edits/0001-tune.patch]\n"
            f"{inputs}    build:\n      script: eng/build_kernels.sh\n"
            f"      args: {{DEMO_KERNEL_UNITS: {units}, CFLAGS: \"-O2\", BENCH_SALT: \"{salt}\"}}\n"
            "    outputs: {prefix: /opt/eng}\ninstall: [engine]\n")


def _timed_image(ws: Path, env: dict) -> float:
    start = time.perf_counter()
    run(eb(ws, "image", "bench-edits"), cwd=ws, env=env)
    return time.perf_counter() - start


def bench_edit_kinds_declared(ws: Path, env: dict, units: int) -> list[Row]:
    folder = ws / "images/bench-edits"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(ws / "images/demo/kernels", folder / "eng")
    (folder / "eng/py").mkdir()
    (folder / "eng/py/launcher.py").write_text(LAUNCHER)
    patch = ws / "patches/bench-edits/0001-tune.patch"
    patch.parent.mkdir(parents=True, exist_ok=True)
    times: dict[tuple[bool, str], float] = {}
    for declared in (True, False):
        salt = uuid.uuid4().hex[:8]
        (folder / "image.yaml").write_text(_spec(declared, units, salt))
        patch.write_text(_patch("py/launcher.py", LAUNCHER, f"LAYERS = range(1, 62, 15)  # {salt}\n"))
        run(eb(ws, "lock", "bench-edits"), cwd=ws, env=env)
        _timed_image(ws, env)  # the first build of this side, untimed
        patch.write_text(_patch("py/launcher.py", LAUNCHER, f"LAYERS = range(0, 62, 15)  # {salt}\n"))
        times[(declared, "script")] = _timed_image(ws, env)
        patch.write_text(_patch("kernel.c", KERNEL_LINE, f"/* tuned {salt} */ {KERNEL_LINE}", KERNEL_NEXT))
        times[(declared, "compiled")] = _timed_image(ws, env)
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(patch.parent, ignore_errors=True)
    command = "python BUILD.py image bench-edits   (patch edited; engine = demo kernels x{u} units + py/launcher.py)"
    return [
        Row(f"q1. a patch to the engine's Python part ({units} compiled units): inputs declared vs not",
            times[(True, "script")], times[(False, "script")], "s", command.format(u=units) + ", inputs declared",
            command.format(u=units) + ", no inputs: every patch rebuilds"),
        Row(f"q2. a patch to a compiled file ({units} units): inputs declared vs not",
            times[(True, "compiled")], times[(False, "compiled")], "s", command.format(u=units) + ", inputs declared",
            command.format(u=units) + ", no inputs"),
    ]
