"""q1-q2. rebuild cost by kind of engine edit, with the component's compiled part declared
(`components.NAME.inputs`) vs without: an engine whose source is the demo's kernel library
(compiled: `kernel.c`, `kernels.h`, the build script) plus a Python launcher (`py/launcher.py`),
with a one-patch stack. Each edit changes the patch (as a DFlash-style fix does), so the
component's source identity stays and only what the patch touches decides; each side is
built once untimed first, then each edit is timed (a full `image`, plan included).
q3. one C file changed on a fresh engine, with the compiler cache the registry carries vs none.
"""
from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

from common import Row, eb, run
from figures import _demo_builder
from helpers.specs import CCACHE_UNITS

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


CC_BUILD = """#!/bin/sh
set -eu
export CCACHE_DIR=/root/.ccache PATH=/usr/bin:/bin
ccache -z >/dev/null
mkdir -p /opt/units /tmp/objs
ls unit_*.c | xargs -P "$(nproc)" -I {} sh -c 'ccache gcc -O2 -c {} -o /tmp/objs/{}.o'
ccache --print-stats > /opt/units/stats.txt
"""


def _cc_units(ws: Path, units: int, salt: str, edited: int | None = None) -> None:
    folder = ws / "images/bench-cc/units"
    folder.mkdir(parents=True, exist_ok=True)
    kernel = (ws / "images/demo/kernels/kernel.c").read_text()
    for i in range(units):
        extra = f"const char *edited_{i} = \"{salt}\";\n" if i == edited else ""
        (folder / f"unit_{i}.c").write_text(f"#define UNIT {i}\nconst char *build_{i} = \"{salt}\";\n{extra}{kernel}")
    (folder / "build.sh").write_text(CC_BUILD)
    (folder / "build.sh").chmod(0o755)
    (ws / "images/bench-cc/image.yaml").write_text(CCACHE_UNITS)


def bench_fresh_runner_compiler_cache(ws: Path, env: dict, registry: str, units: int) -> Row:
    """q3. one C file changed, built on a fresh engine: the compiler cache carried by the registry
    cache vs none (each side a fresh engine and a store with the downloads already in it)."""
    from helpers.engines import start_engine

    salt = uuid.uuid4().hex[:8]
    cache = f"{registry}/enginebuild-bench/cc-{salt}"
    _cc_units(ws, units, salt)
    run(eb(ws, "lock", "bench-cc"), cwd=ws, env=env)
    run(eb(ws, "image", "bench-cc", "--cache", cache), cwd=ws, env=env)  # fills the registry's compiler cache
    _cc_units(ws, units, salt, edited=1)
    times = {}
    for label, extra in (("carried", ["--cache", cache, "--cache-readonly"]), ("none", ["--no-registry-cache"])):
        home = Path(f"/tmp/eb-bench-cc-home-{label}-{salt}")
        engine = start_engine(Path(f"/tmp/eb-bench-cc-engine-{label}"), index=3)
        try:
            fresh = {**env, **engine.env, "ENGINEBUILD_HOME": str(home)}
            run(eb(ws, "fetch", "bench-cc"), cwd=ws, env=fresh)  # downloads are not what is measured
            start = time.perf_counter()
            run(eb(ws, "image", "bench-cc", *extra), cwd=ws, env=fresh)
            times[label] = time.perf_counter() - start
        finally:
            engine.stop()
            shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(ws / "images/bench-cc", ignore_errors=True)
    return Row(f"q3. one C file of {units} changed, on a fresh engine: compiler cache from the registry vs none",
               times["carried"], times["none"], "s",
               "python BUILD.py image bench-cc --cache R   (fresh engine; ccache restored from R: 1 miss)",
               f"python BUILD.py image bench-cc --no-registry-cache   (fresh engine; {units} misses)")
