"""q. rebuild cost by kind of engine edit, enginebuild vs a hand-written Dockerfile: compile
units (what the compiler cache counts as misses: files really compiled) and seconds.

The engine, as vLLM is shaped: UNITS C files (`units/`, each the demo's kernel source) compiled
through ccache, and a Python part (`py/launcher.py`), one patch stack over both. enginebuild
builds it as two components from the one patched source (`engine`: inputs `units/**`, its
compiler cache `/root/.ccache`; `engine-py`: inputs `py/**`), with the registry cache. The
hand-written Dockerfile is what recipes write today: the tree copied, the patches applied and
the whole engine built in one RUN, ccache in a BuildKit cache mount of its own id (not shared
with enginebuild's builds on the same engine; the same builder packages, exported from
enginebuild's builder environment as sysroot.tar). Each side is built once untimed,
then each edit is timed as a whole build:

q1. a patch to the Python part (the median of three such edits on each side); q2. a patch to
one C file, warm machine; q3. a patch to another C file on a fresh runner (a new engine and an
empty store, downloads fetched first; enginebuild with the registry cache, the Dockerfile with
what a fresh engine has); q4. a compiler flag added (CFLAGS -O2 -> -O2 -fno-strict-aliasing),
warm machine.
"""
from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from pathlib import Path

from common import ROOT, Row, eb, run

DOCKER = "/usr/bin/docker"
LAUNCHER = "LAYERS = range(1, 62, 15)\n"
FLAGS = "-O2 -fno-strict-aliasing"  # q4's flags: the same optimisation work, other code
Result = tuple[float, int, int]  # seconds, files compiled, compiler calls answered by the cache
BUILD_UNITS = """#!/bin/sh
set -eu
export CCACHE_DIR=/root/.ccache PATH=/usr/bin:/bin
ccache -z >/dev/null
mkdir -p /opt/units /tmp/objs
# CFLAGS is a list of compiler flags: word splitting is wanted.
# shellcheck disable=SC2086
ls units/*.c | xargs -P "$(nproc)" -I {} sh -c "ccache gcc $CFLAGS -c {} -o /tmp/objs/\\$(basename {}).o"
ccache --print-stats > /opt/units/stats.txt
"""
BUILD_PY = "#!/bin/sh\nset -eu\nmkdir -p /opt/py\ncp py/launcher.py /opt/py/\n"
DOCKERFILE = """FROM scratch
ADD sysroot.tar /
COPY eng/ /opt/src/eng/
COPY 0001-tune.patch /tmp/
ARG CFLAGS=-O2
RUN --mount=type=cache,id=handwritten-ccache,target=/root/.ccache cd /opt/src/eng && patch -p1 < /tmp/0001-tune.patch \\
    && CFLAGS="$CFLAGS" sh build_units.sh && sh build_py.sh
"""


def _builder() -> str:
    from helpers.specs import CCACHE_UNITS  # the demo's builder packages and ccache

    return CCACHE_UNITS[CCACHE_UNITS.index("builder:"):CCACHE_UNITS.index("components:")]


def _spec(cflags: str) -> str:
    stack = "    patches: [bench-kinds/0001-tune.patch]\n"
    return (f"description: bench edit kinds\nbase: scratch\nplatform: linux/amd64\n{_builder()}components:\n"
            f"  engine:\n    source: {{path: eng}}\n{stack}    inputs: [\"units/**\"]\n"
            f"    build: {{script: eng/build_units.sh, cache: [/root/.ccache], args: {{CFLAGS: \"{cflags}\"}}}}\n"
            "    outputs: {paths: [/opt/units]}\n"
            f"  engine-py:\n    source: {{path: eng}}\n{stack}    inputs: [\"py/**\"]\n"
            "    build: {script: eng/build_py.sh}\n    outputs: {paths: [/opt/py]}\n"
            "install: [engine, engine-py]\n")


def _patch(edits: dict[str, tuple[str, str, str, str]]) -> str:
    """One patch replacing a line of each file named: (the line before it and the line after it,
    or "" for a file of one line; the old line; the new one)."""
    text = "Subject: tune the engine\nDescription: a bench edit\nUpstream: not forwarded (bench)\n---\n"
    for path, (before, old, new, after) in edits.items():
        count = ",3" if before else ""
        text += f"--- a/{path}\n+++ b/{path}\n@@ -1{count} +1{count} @@\n" + (f" {before}" if before else "")
        text += f"-{old}+{new}" + (f" {after}" if after else "")
    return text


class Sides:
    """The engine's tree, its patch and spec in a workspace, and the hand-written context."""

    def __init__(self, ws: Path, units: int, salt: str):
        self.ws, self.units, self.salt = ws, units, salt
        self.folder = ws / "images/bench-kinds"
        self.patch_file = ws / "patches/bench-kinds/0001-tune.patch"
        self.hand = Path(tempfile.mkdtemp(prefix="eb-bench-kinds-"))
        self.edits: dict[str, tuple[str, str, str, str]] = {
            "py/launcher.py": ("", LAUNCHER, f"LAYERS = range(1, 62, 15)  # {salt}\n", "")}
        self.kernel = kernel = (ROOT / "images/demo/kernels/kernel.c").read_text()
        eng = self.folder / "eng"
        (eng / "units").mkdir(parents=True, exist_ok=True)
        (eng / "py").mkdir(exist_ok=True)
        for i in range(units):
            (eng / f"units/unit_{i}.c").write_text(f"#define UNIT {i}\nconst char *build_{i} = \"{salt}\";\n{kernel}")
        (eng / "py/launcher.py").write_text(LAUNCHER)
        (eng / "build_units.sh").write_text(BUILD_UNITS)
        (eng / "build_py.sh").write_text(BUILD_PY)
        for script in ("build_units.sh", "build_py.sh"):
            (eng / script).chmod(0o755)
        self.patch_file.parent.mkdir(parents=True, exist_ok=True)
        self.spec("-O2")
        self.write_patch()

    def spec(self, cflags: str) -> None:
        (self.folder / "image.yaml").write_text(_spec(cflags))

    def edit_unit(self, i: int) -> None:
        line = f"const char *build_{i} = \"{self.salt}\";\n"
        after = self.kernel.splitlines(keepends=True)[0]
        self.edits[f"units/unit_{i}.c"] = (f"#define UNIT {i}\n", line, line.replace("\";", "-tuned\";"), after)
        self.write_patch()

    def edit_python(self, n: int) -> None:
        self.edits["py/launcher.py"] = ("", LAUNCHER, f"LAYERS = range({n}, 62, 15)  # {self.salt}\n", "")
        self.write_patch()

    def write_patch(self) -> None:
        self.patch_file.write_text(_patch(self.edits))
        if (self.hand / "Dockerfile").exists():
            shutil.copy(self.patch_file, self.hand / "0001-tune.patch")

    def make_context(self, env: dict) -> None:
        """The hand-written context: the unpatched tree, the patch, the builder environment."""
        out = Path(tempfile.mkdtemp(prefix="eb-bench-kinds-render-"))
        try:
            run(eb(self.ws, "render", "bench-kinds", "--out", str(out)), cwd=self.ws, env=env)
            dockerfile = next(out.rglob("*-component-engine/Dockerfile")).read_text()
        finally:
            shutil.rmtree(out, ignore_errors=True)
        chain = next(line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM "))
        container = run([DOCKER, "create", chain, "/nothing"]).stdout.strip()
        try:
            run([DOCKER, "export", "-o", str(self.hand / "sysroot.tar"), container])
        finally:
            run([DOCKER, "rm", container])
        shutil.copytree(self.folder / "eng", self.hand / "eng")
        (self.hand / "Dockerfile").write_text(DOCKERFILE)
        shutil.copy(self.patch_file, self.hand / "0001-tune.patch")

    def cleanup(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.rmtree(self.patch_file.parent, ignore_errors=True)
        shutil.rmtree(self.hand, ignore_errors=True)


def _counts(image: str, env: dict | None = None) -> tuple[int, int]:
    """Files compiled in the build that made `image` and compiler calls answered from the cache
    (ccache's misses and hits, from the stats it kept)."""
    container = run([DOCKER, "create", image, "/nothing"], env=env).stdout.strip()
    folder = Path(tempfile.mkdtemp(prefix="eb-bench-stats-"))
    try:
        run([DOCKER, "cp", f"{container}:/opt/units/stats.txt", str(folder)], env=env)
        text = (folder / "stats.txt").read_text()
    finally:
        run([DOCKER, "rm", container], env=env)
        shutil.rmtree(folder, ignore_errors=True)
    counts = dict(line.split("\t")[:2] for line in text.splitlines() if "\t" in line)
    hits = int(counts.get("direct_cache_hit", 0)) + int(counts.get("preprocessed_cache_hit", 0))
    return int(counts.get("cache_miss", 0)), hits


def _ours(sides: Sides, env: dict, *extra: str) -> Result:
    start = time.perf_counter()
    proc = run(eb(sides.ws, "image", "bench-kinds", *extra), cwd=sides.ws, env=env)
    seconds = time.perf_counter() - start
    built = "component engine: built" in proc.stdout + proc.stderr
    return (seconds, *(_counts("enginebuild/bench-kinds:latest", env) if built else (0, 0)))


def _theirs(sides: Sides, tag: str, env: dict | None = None, cflags: str = "-O2") -> Result:
    start = time.perf_counter()
    run([DOCKER, "build", "-q", "-t", tag, "--build-arg", f"CFLAGS={cflags}", str(sides.hand)],
        env={"DOCKER_BUILDKIT": "1", **(env or {})})
    return (time.perf_counter() - start, *_counts(tag, env))


def _fresh_runner(sides: Sides, env: dict, cache: str) -> tuple[Result, Result]:
    from helpers.engines import start_engine

    home = Path(f"/tmp/eb-bench-kinds-home-{sides.salt}")
    engine = start_engine(Path(f"/tmp/eb-bench-kinds-engine-{sides.salt}"), index=3)
    try:
        fresh = {**env, **engine.env, "ENGINEBUILD_HOME": str(home)}
        run(eb(sides.ws, "fetch", "bench-kinds"), cwd=sides.ws, env=fresh)  # downloads are not what is measured
        ours = _ours(sides, fresh, "--cache", cache, "--cache-readonly")
        theirs = _theirs(sides, "eb-bench-kinds-hand:fresh", engine.env)
    finally:
        engine.stop()
        shutil.rmtree(home, ignore_errors=True)
    return ours, theirs


def bench_edit_kinds(ws: Path, env: dict, registry: str, units: int) -> list[Row]:
    salt = uuid.uuid4().hex[:8]
    cache = f"{registry}/enginebuild-bench/kinds-{salt}"
    sides = Sides(ws, units, salt)
    results: dict[str, tuple[Result, Result]] = {}
    try:
        run(eb(ws, "lock", "bench-kinds"), cwd=ws, env=env)
        run(eb(ws, "image", "bench-kinds", "--cache", cache), cwd=ws, env=env)  # untimed first build
        sides.make_context(env)
        run([DOCKER, "build", "-q", "-t", "eb-bench-kinds-hand", str(sides.hand)], env={"DOCKER_BUILDKIT": "1"})
        # a sub-second figure: the median of three edits on each side (each edit a new patch)
        runs = []
        for n in (0, 3, 5):
            sides.edit_python(n)
            runs.append((_ours(sides, env, "--cache", cache), _theirs(sides, "eb-bench-kinds-hand")))
        results["python"] = tuple(sorted((run[side] for run in runs), key=lambda r: r[0])[1]  # type: ignore[assignment]
                                  for side in (0, 1))
        sides.edit_unit(1)
        results["c-warm"] = _ours(sides, env, "--cache", cache), _theirs(sides, "eb-bench-kinds-hand")
        sides.edit_unit(2)
        results["c-fresh"] = _fresh_runner(sides, env, cache)
        sides.spec(FLAGS)
        results["flag"] = _ours(sides, env, "--cache", cache), _theirs(sides, "eb-bench-kinds-hand", cflags=FLAGS)
    finally:
        sides.cleanup()
        run([DOCKER, "rmi", "-f", "eb-bench-kinds-hand"], check=False)
    names = {"python": "q1. a patch to the engine's Python part",
             "c-warm": "q2. a patch to one C file, warm machine",
             "c-fresh": "q3. a patch to one C file, fresh runner",
             "flag": "q4. a compiler flag added (-fno-strict-aliasing)"}
    ours_cmd = f"python BUILD.py image bench-kinds --cache R   (engine: {units} C files + py/, inputs declared)"
    theirs_cmd = "docker build   (hand-written: COPY tree, patch, one RUN with a ccache cache mount)"
    rows = []
    for kind, name in names.items():
        (ours_s, ours_u, ours_h), (theirs_s, theirs_u, theirs_h) = results[kind]
        note = f"compiler calls answered by ccache: {ours_h} vs {theirs_h}"
        rows.append(Row(f"{name}: compile units of {units}", ours_u, theirs_u, "units", ours_cmd, theirs_cmd, note))
        rows.append(Row(f"{name}: seconds", ours_s, theirs_s, "s", ours_cmd, theirs_cmd))
    return rows
