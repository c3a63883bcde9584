"""p. two independent components of equal work on two builders vs both on one builder.

Each builder is a Docker engine of its own (data root, socket, bridge) started for the figure
and pinned with `taskset` to one CPU of its own: the engine, its BuildKit and every build step
it runs inherit that affinity, so on a 2-core machine "two builders" means two CPUs' worth of
builders and "one builder" one CPU's, as two Sparks against one. Each configuration builds
the builder environment once first (not timed), then both components with keys no run has
made (a salt build argument), so the timed runs compile everything.
"""
from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

from common import Row, eb, run
from figures import pair_spec
from helpers.engines import start_engine


def bench_builders(ws: Path, env: dict, units: int) -> Row:
    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2 or os.geteuid() != 0:
        raise SystemExit("figure p needs root (to start engines) and 2 CPUs")
    first, second = sorted(cpus)[:2]
    folder = ws / "images/bench-builders"
    folder.mkdir(exist_ok=True)
    if not (folder / "kernels").exists():
        shutil.copytree(ws / "images/demo/kernels", folder / "kernels")
    engines = []
    try:
        for index, cpu in ((1, first), (15, second)):
            engines.append(start_engine(Path(f"/tmp/eb-bench-builder{index}"), index=index, cpus=str(cpu)))
        one = ["--builder", f"one={engines[0].host}"]
        two = one + ["--builder", f"two={engines[1].host}"]
        times = {}
        for label, builders in (("warm-up", two), ("two builders", two), ("one builder", one)):
            (folder / "image.yaml").write_text(pair_spec(["a", "b"], units, f"{label}-{uuid.uuid4().hex[:6]}"))
            run(eb(ws, "lock", "bench-builders"), cwd=ws, env=env)
            start = time.perf_counter()
            run(eb(ws, "image", "bench-builders", "--jobs", "2", *builders), cwd=ws, env=env)
            times[label] = time.perf_counter() - start
    finally:
        for engine in engines:
            engine.stop()
    return Row(f"p. two components ({units} units each) on two builders vs one", times["two builders"],
               times["one builder"], "s",
               "python BUILD.py image bench-builders --builder one=… --builder two=…   (each engine on 1 CPU)",
               "python BUILD.py image bench-builders --builder one=…   (the same engine, both components)",
               note=f"warm-up (builder environment made and loaded) {times['warm-up']:.1f} s")
