"""enginebuild's benchmark suite: every figure measured side by side with its baseline, in one run.

    python bench/run.py [--units N] [--only a,...,o] [--registry 127.0.0.1:5000]

Every figure is for linux/amd64 (the hand-written Dockerfile's platform).

a. no-op `image demo` vs (a1) `docker build` of the hand-written Dockerfile, fully cached, and
   (a2) `docker build` of the rendered BuildKit Dockerfiles (components, command layers), cached
b. script edit, warm machine: enginebuild vs a hand-written single Dockerfile (scripts last);
   b0. the engine's own time to load one new layer (the floor under b), against the same baseline
g. script edit -> pushed to the local registry: `image --push` vs `docker build` + `docker push`
h-m. see bench/figures.py: parallel components, rebuild cost by kind of edit, normalisation,
   arm64 cold build, verify, secret scan at push
n. see bench/serving.py: llama.cpp built from source and serving (cold build, one-line source
   edit with and without the compiler cache, time to ready, llama-benchy tokens per second)
o. see bench/scale.py: vLLM at real scale (199 distributions, 4 GiB of wheels): cold build with
   the store empty and warm, size, layers, peak RSS, push time and bytes, bytes after a launcher
   edit and after a small bump, reproduce, verify; each beside a hand-written Dockerfile that
   runs `pip install --require-hashes` on the same base (run only when named: `--only o`)
p. see bench/builders.py: two independent components of equal work on two builders (engines
   pinned to one CPU each) vs both on one builder
q. see bench/editkinds.py: rebuild cost by kind of engine edit (a patch to the Python part, one C
   file on a warm machine and on a fresh runner, a compiler flag), compile units and seconds,
   enginebuild vs a hand-written Dockerfile with a ccache cache mount
c. script edit on a fresh engine sharing the registry: enginebuild --cache vs the hand-written
   Dockerfile on a fresh engine (the kernels component compiles DEMO_KERNEL_UNITS units)
d. bytes and layers pushed after a script edit vs the size of the edited file
e. patch check of one stack against the vllm 0.21.0 sdist vs extract + git init + git apply
f. plan of the whole catalogue
t. see bench/cijob.py: the mission's CI job at real scale (vllm-pypi) on fresh runners: cold build
   and push, a second runner with the registry cache, a third after a small bump (only when named)
s. see bench/compression.py: a push's gzip of several layers side by side vs one at a time; zstd and gzip-isal vs gzip
v. see bench/signing.py: a signed push vs the same push unsigned (seconds, bytes); the bytes
   signing adds to vllm-pypi's push
u. see bench/behaviour.py: whether vLLM 0.21.0, 0.22.0 and the newest release still need the DFlash patch,
   by what the patch's checks print in each built without it (a table, not a ratio; only when named)

Needs the set-up of scripts/setup.sh (Docker engine, registry on 127.0.0.1:5000), root
(for a second engine), and network access to PyPI and Debian's archive.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import builders  # noqa: E402
import editkinds  # noqa: E402
import figures  # noqa: E402
import scale  # noqa: E402
import serving  # noqa: E402
from common import ROOT, Row, eb, print_table, run, scratch_workspace, timed  # noqa: E402

DOCKER = os.environ.get("ENGINEBUILD_DOCKER", "/usr/bin/docker")
AMD64 = ("--platform", "linux/amd64")  # the hand-written Dockerfile builds this platform


def docker_build(context: Path, tag: str, env=None, build_args=()) -> float:
    args = [DOCKER, "build", "-q", "-t", tag]
    for arg in build_args:
        args += ["--build-arg", arg]
    start = time.perf_counter()
    run(args + [str(context)], env={"DOCKER_BUILDKIT": "1", **(env or {})})
    return time.perf_counter() - start


def handwritten_context(ws: Path, rendered: Path, folder: Path) -> Path:
    """The hand-written Dockerfile's context: the demo's sources, patch and scripts, and its
    builder environment exported from the engine as sysroot.tar (the same pinned packages)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "bench/handwritten/Dockerfile", folder / "Dockerfile")
    dockerfile = next(rendered.glob("*/*-component-kernels/Dockerfile")).read_text()
    chain = next(line.split()[1] for line in dockerfile.splitlines() if line.startswith("FROM "))
    container = run([DOCKER, "create", chain, "/nothing"]).stdout.strip()
    try:
        run([DOCKER, "export", "-o", str(folder / "sysroot.tar"), container])
    finally:
        run([DOCKER, "rm", container])
    shutil.copytree(ws / "images/demo/engine", folder / "engine")
    shutil.copytree(ws / "images/demo/kernels", folder / "kernels")
    shutil.copy(ws / "patches/demo-engine/0001-aux-layer-ids-off-by-one.patch", folder)
    for name in ("launch_server.sh", "wait_for_server.sh"):
        shutil.copy(ws / "images/demo" / name, folder / name)
    return folder


def edit(path: Path) -> int:
    with open(path, "a") as handle:
        handle.write(f"# tuned {uuid.uuid4().hex[:8]}\n")
    return path.stat().st_size


def bench_noop(ws, env, hand: Path, rendered: Path) -> list[Row]:
    run(eb(ws, "image", "demo", *AMD64), cwd=ws, env=env)
    time.sleep(2.5)  # inputs written seconds ago are not trusted by the plan memo
    run(eb(ws, "image", "demo", *AMD64), cwd=ws, env=env)
    ours = timed(eb(ws, "image", "demo", *AMD64), repeat=7, cwd=ws, env=env)
    docker_build(hand, "enginebuild-bench/handwritten:noop")  # warm
    single = statistics.median(docker_build(hand, "enginebuild-bench/handwritten:noop") for _ in range(5))
    stages = sorted(p.parent for p in rendered.glob("*/[0-9]*/Dockerfile")
                    if len(list(p.parent.iterdir())) > 1)  # the contexts render could complete

    def all_stages():
        for i, folder in enumerate(stages):
            docker_build(folder, f"enginebuild-bench/stage:{i}")

    all_stages()  # warm
    times = []
    for _ in range(3):
        start = time.perf_counter()
        all_stages()
        times.append(time.perf_counter() - start)
    floor = timed([sys.executable, "-c", "pass"], repeat=7)
    quiet = timed(eb(ws, "image", "demo", *AMD64, "-q"), repeat=7, cwd=ws, env=env)
    locked = timed(eb(ws, "image", "demo", *AMD64, "--locked"), repeat=7, cwd=ws, env=env)
    return [Row("a0. no-op image demo vs the interpreter's start", ours, floor, "s",
                "python BUILD.py image demo --platform linux/amd64   (nothing changed)",
                "python -c pass   (this machine's floor for any Python command)"),
            Row("a1. no-op image demo", ours, single, "s",
                "python BUILD.py image demo --platform linux/amd64   (nothing changed)",
                "docker build of the hand-written Dockerfile, fully cached"),
            Row("a2. no-op image demo (per-build baseline)", ours, statistics.median(times), "s",
                "python BUILD.py image demo --platform linux/amd64   (nothing changed)",
                f"docker build of the {len(stages)} rendered BuildKit Dockerfiles (render --out), all cached"),
            Row("a3. no-op image demo -q vs without -q", quiet, ours, "s",
                "python BUILD.py image demo --platform linux/amd64 -q", "a0's command (the no-op path)"),
            Row("a4. no-op image demo --locked (CI's line) vs without", locked, ours, "s",
                "python BUILD.py image demo --platform linux/amd64 --locked", "a0's command (the no-op path)")]


def bench_warm_edit(ws, env, hand: Path) -> list[Row]:
    ours_times, baseline_times = [], []
    docker_build(hand, "enginebuild-bench/handwritten:warm")
    for _attempt in range(4):  # the first edit of each warms up (builder detection, bytecode); not counted
        edit(ws / "images/demo/launch_server.sh")
        start = time.perf_counter()
        run(eb(ws, "image", "demo", *AMD64), cwd=ws, env=env)
        ours_times.append(time.perf_counter() - start)
        edit(hand / "launch_server.sh")
        baseline_times.append(docker_build(hand, "enginebuild-bench/handwritten:warm"))
    ours, baseline = statistics.median(ours_times[1:]), statistics.median(baseline_times[1:])
    floor = figures.load_floor("enginebuild/demo:latest")
    return [Row("b. script edit, warm machine", ours, baseline, "s",
                "python BUILD.py image demo --platform linux/amd64   (after editing launch_server.sh)",
                "docker build of the hand-written Dockerfile (BuildKit, warm cache)"),
            Row("b0. the engine's floor for b: loading one new layer", floor, baseline, "s",
                "POST /images/load of an image adding one small layer to the demo (only that layer sent)",
                "docker build of the hand-written Dockerfile (BuildKit, warm cache)")]


def bench_fresh_edit(ws, env, hand: Path, registry: str, units: int) -> Row:
    from helpers.engines import start_engine

    cache = f"{registry}/enginebuild-bench/cache-{uuid.uuid4().hex[:8]}"
    arg = f"DEMO_KERNEL_UNITS={units}"
    start = time.perf_counter()
    run(eb(ws, "image", "demo", *AMD64, "--build-arg", arg, "--cache", cache), cwd=ws, env=env)
    print(f"  (c) populating the cache on this machine took {time.perf_counter() - start:.0f}s", file=sys.stderr)
    edit(ws / "images/demo/launch_server.sh")
    edit(hand / "launch_server.sh")
    scratch = Path(tempfile.mkdtemp(prefix="eb-bench-engines-"))
    engine = start_engine(scratch / "ours", index=3)
    try:
        fresh_env = {**env, "DOCKER_HOST": engine.host, "ENGINEBUILD_HOME": str(scratch / "home-ours")}
        start = time.perf_counter()
        run(eb(ws, "image", "demo", *AMD64, "--build-arg", arg, "--cache", cache), cwd=ws, env=fresh_env)
        ours = time.perf_counter() - start
    finally:
        engine.stop()
    engine = start_engine(scratch / "baseline", index=4)
    try:
        baseline = docker_build(hand, "enginebuild-bench/handwritten:fresh", env={"DOCKER_HOST": engine.host},
                                build_args=[arg])
    finally:
        engine.stop()
    shutil.rmtree(scratch, ignore_errors=True)
    return Row(f"c. script edit, fresh engine ({units} units)", ours, baseline, "s",
               f"python BUILD.py image demo --build-arg {arg} --cache REGISTRY/cache   (new, empty engine)",
               f"docker build --build-arg {arg} of the hand-written Dockerfile (new, empty engine)")


def bench_edit_to_pushed(ws, env, hand: Path, registry: str) -> Row:
    """Edit a launch script, then build and push: the whole loop, to the local registry."""
    repo = f"{registry}/enginebuild-bench/loop-{uuid.uuid4().hex[:8]}"
    theirs = f"{registry}/enginebuild-bench/loop-hand-{uuid.uuid4().hex[:8]}"
    ours_times, baseline_times = [], []
    for attempt in range(4):  # the first round pushes everything: not counted
        edit(ws / "images/demo/launch_server.sh")
        start = time.perf_counter()
        run(eb(ws, "image", "demo", *AMD64, "--push", "--to", repo, "--push-tag", f"t{attempt}"), cwd=ws, env=env)
        ours_times.append(time.perf_counter() - start)
        edit(hand / "launch_server.sh")
        start = time.perf_counter()
        docker_build(hand, f"{theirs}:t{attempt}")
        run([DOCKER, "push", "-q", f"{theirs}:t{attempt}"])
        baseline_times.append(time.perf_counter() - start)
    return Row("g. script edit -> pushed", statistics.median(ours_times[1:]), statistics.median(baseline_times[1:]),
               "s", "python BUILD.py image demo --platform linux/amd64 --push --to REPO   (after an edit)",
               "docker build + docker push of the hand-written Dockerfile (after the same edit)",
               note=f"enginebuild {', '.join(f'{t:.2f}' for t in ours_times[1:])} s")


def bench_push(ws, env, registry: str) -> Row:
    repo = f"{registry}/enginebuild-bench/push-{uuid.uuid4().hex[:8]}"
    run(eb(ws, "image", "demo", *AMD64), cwd=ws, env=env)
    run(eb(ws, "push", "demo", *AMD64, "--no-attach", "--to", repo, "--tag", "before"), cwd=ws, env=env)
    size = edit(ws / "images/demo/launch_server.sh")
    run(eb(ws, "image", "demo", *AMD64), cwd=ws, env=env)
    run(eb(ws, "push", "demo", *AMD64, "--no-attach", "--to", repo, "--tag", "after"), cwd=ws, env=env)
    record = next(r for r in json.loads((ws / "lockfiles/demo.pushes.json").read_text())["pushes"] if r["tag"] == "after")
    import requests

    base = f"http://{repo.split('/', 1)[0]}/v2/{repo.split('/', 1)[1]}/manifests"
    accept = {"Accept": "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json"}
    top = requests.get(f"{base}/after", headers=accept)
    manifests = len(top.content)
    doc = top.json()
    if "manifests" in doc:  # an index: add the platform's manifest
        child = requests.get(f"{base}/{doc['manifests'][0]['digest']}", headers=accept)
        manifests += len(child.content)
        doc = child.json()
    manifests += doc["config"]["size"]
    return Row("d. bytes pushed after a script edit", record["bytes_pushed"], size + manifests, "bytes",
               f"python BUILD.py push demo --to REPO   ({record['layers_pushed']} layer(s) uploaded)",
               f"the edited file ({size} bytes) + index, manifest and config ({manifests} bytes)",
               note=f"layers uploaded: {record['layers_pushed']}")


def bench_plan(ws, env) -> Row:
    names = json.loads(run(eb(ws, "list", "--json"), cwd=ws, env=env).stdout)
    count = sum(1 for r in names if r["lock"] != "abstract")
    ours = timed(eb(ws, "plan", "--all", "--json"), repeat=5, cwd=ws, env=env)
    each = timed(eb(ws, "plan", "demo", "--json"), repeat=5, cwd=ws, env=env)
    return Row(f"f. plan of the whole catalogue ({count} images)", ours, each * count, "s",
               "python BUILD.py plan --all --json",
               f"python BUILD.py plan IMAGE --json, {count} times (one image per run)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--units", type=int, default=110, help="kernel units for (c); 110 is about 75 s here")
    parser.add_argument("--only", default="a,b,c,d,e,f,g,h,i,j,k,l,m,n,p,q,s",
                        help="figures to measure; o (vLLM at real scale: about 15 GB of disk, 30 min), t (the CI job at "
                             "real scale: about 25 GB, 30 min) and r (a "
                             "patch to vLLM's Python at real scale: about 30 GB, 15 min) and w (a fresh container's start at real "
                             "scale: about 25 GB, 20 min) only when named")
    parser.add_argument("--pair-units", type=int, default=40, help="kernel units per component for (h)")
    parser.add_argument("--scale-builds-only", action="store_true",
                        help="with o: only the build rows (o0-o4, o1), not push, reproduce or verify")
    parser.add_argument("--registry", default="127.0.0.1:5000")
    parser.add_argument("--registry-root", default="/tmp/enginebuild-registry/data",
                        help="the registry's storage folder (o counts the bytes a push adds there)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    own_home = not os.environ.get("ENGINEBUILD_HOME")
    home = Path(os.environ.get("ENGINEBUILD_HOME") or tempfile.mkdtemp(prefix="eb-bench-home-"))
    env = {"ENGINEBUILD_HOME": str(home)}
    ws = scratch_workspace("suite")
    rows = Rows()
    rendered = Path(tempfile.mkdtemp(prefix="eb-bench-render-"))
    try:
        hand = None
        if only & {"a", "b", "c", "g", "i"}:
            start = time.perf_counter()
            run(eb(ws, "image", "demo", *AMD64), cwd=ws, env=env)
            print(f"  building the demo took {time.perf_counter() - start:.0f}s", file=sys.stderr)
            run(eb(ws, "render", "demo", *AMD64, "--out", str(rendered)), cwd=ws, env=env)
            hand = handwritten_context(ws, rendered, Path(tempfile.mkdtemp(prefix="eb-bench-hand-")) / "ctx")
        if "a" in only:
            rows += bench_noop(ws, env, hand, rendered)
        if "b" in only:
            rows += bench_warm_edit(ws, env, hand)
        if "g" in only:
            rows.append(bench_edit_to_pushed(ws, env, hand, args.registry))
        if "c" in only:
            rows.append(bench_fresh_edit(ws, env, hand, args.registry, args.units))
        if "d" in only:
            rows.append(bench_push(ws, env, args.registry))
        if "m" in only:
            rows.append(figures.bench_secret_scan(ws, env, args.registry))
        if "j" in only:
            rows += figures.bench_normalize(DOCKER)
        if "h" in only:
            rows.append(figures.bench_parallel(ws, env, args.pair_units))
        if "q" in only:
            rows += editkinds.bench_edit_kinds(ws, env, args.registry, args.pair_units)
        if "p" in only:
            rows.append(builders.bench_builders(ws, env, args.pair_units))
        if "k" in only:
            rows.append(figures.bench_arm64_cold(ws, env))
        if "l" in only:
            rows += figures.bench_verify(ws, env)
        if "i" in only:
            rows += figures.bench_edit_kinds(ws, env, hand, docker_build)
        if "n" in only:
            serving.bench_llamacpp(ws, env, rows)
        if "o" in only:
            root = Path(args.registry_root)
            scale.bench_scale(ws, env, rows, args.registry, root if args.registry_root else None,
                              builds_only=args.scale_builds_only)
        if "r" in only:
            from mission import bench_patch_to_image
            root = Path(args.registry_root)
            bench_patch_to_image(ws, env, rows, args.registry, root if args.registry_root else None)
        if "e" in only:
            from patchcheck import bench as bench_patches
            rows += bench_patches(home)
        if "f" in only:
            rows.append(bench_plan(ws, env))
        if "t" in only:
            from cijob import bench_ci_job
            bench_ci_job(ws, env, rows, args.registry, Path(args.registry_root))
        if "s" in only:
            from compression import bench_compression
            rows += bench_compression()
        if "v" in only:
            from signing import bench_signing
            bench_signing(ws, env, rows, args.registry)
        if "w" in only:
            from start import bench_start
            bench_start(ws, env, rows)
        if "u" in only:
            from behaviour import bench_behaviour
            bench_behaviour(ws, env)
    finally:
        shutil.rmtree(ws, ignore_errors=True)
        shutil.rmtree(rendered, ignore_errors=True)
        if hand is not None:  # the hand-written Dockerfile's context: a copy of the demo's sources
            shutil.rmtree(hand.parent, ignore_errors=True)
        if own_home:
            shutil.rmtree(home, ignore_errors=True)
    print_table(rows)
    return 0


class Rows(list):
    """Rows, each also printed to stderr as soon as it is measured (a later failure loses none)."""

    def append(self, row) -> None:
        super().append(row)
        print(f"  {row.name}: {row.ours:.3f} vs {row.baseline:.3f} {row.unit} (ratio {row.ratio:.3f})"
              + (f"  {row.note}" if row.note else ""), file=sys.stderr, flush=True)

    def __iadd__(self, rows):
        for row in rows:
            self.append(row)
        return self


if __name__ == "__main__":
    sys.exit(main())
