"""Figures beyond the edit loop, each measured beside its baseline in the same run:

h. two independent components (each one compiler job, >= 10 s) vs one of them alone
i. rebuild cost by kind of edit (runtime system package, engine source), enginebuild vs the
   hand-written Dockerfile (where a package in the first layer recompiles everything)
j. normalising layers written by commands: the demo's layers and a 1 GB layer, vs one sha256 pass
k. arm64 cold demo build under emulation (nothing reused) vs the amd64 cold build
l. `verify` of an image holding the 240 MB vLLM 0.21.0 aarch64 wheel vs one sha256 pass over it
m. the secret scan at push: first push vs a push of the same layers (verdicts kept per layer)
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

from common import ROOT, Row, eb, run

AMD64 = ("--platform", "linux/amd64")


def _sha_pass(path: Path) -> float:
    start = time.perf_counter()
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return time.perf_counter() - start


def _demo_builder() -> str:
    text = (ROOT / "images/demo/image.yaml").read_text()
    start = text.index("builder:\n")
    return text[start:text.index("\ncomponents:", start)] + "\n"


def pair_spec(components: list[str], units: int, salt: str) -> str:
    body = "".join(f"""
  {name}:
    source: {{path: kernels}}
    build:
      script: kernels/build_kernels.sh
      args: {{DEMO_KERNEL_UNITS: {units}, DEMO_JOBS: 1, CFLAGS: "-O2", BENCH_SALT: "{salt}-{name}"}}
    outputs: {{prefix: /opt/{name}}}""" for name in components)
    return (f"description: bench pair\nplatform: linux/amd64\nbase: scratch\n{_demo_builder()}"
            f"components:{body}\ninstall: [{', '.join(components)}]\n")


def bench_parallel(ws: Path, env: dict, units: int) -> Row:
    folder = ws / "images/bench-pair"
    folder.mkdir(exist_ok=True)
    shutil.copytree(ws / "images/demo/kernels", folder / "kernels", dirs_exist_ok=True)
    times = {}
    for label, names in (("one", ["a"]), ("two", ["a", "b"]), ("warm-one", ["a"])):
        (folder / "image.yaml").write_text(pair_spec(names, units, f"{label}-{uuid.uuid4().hex[:6]}"))
        run(eb(ws, "lock", "bench-pair"), cwd=ws, env=env)
        start = time.perf_counter()
        run(eb(ws, "image", "bench-pair", "--jobs", "2"), cwd=ws, env=env)
        times[label] = time.perf_counter() - start
    one = min(times["one"], times["warm-one"])  # the first also made the builder environment
    return Row(f"h. two independent components ({units} units each)", times["two"], one, "s",
               "python BUILD.py image bench-pair   (components a and b, nothing needs the other)",
               "python BUILD.py image bench-pair   (component a alone, same work)",
               note=f"one alone {times['one']:.1f} s and {times['warm-one']:.1f} s")


def bench_edit_kinds(ws: Path, env: dict, hand: Path, docker_build) -> list[Row]:
    rows = []
    # an engine source edit: both rebuild the engine (and only it)
    for target in (ws / "images/demo/engine/engine.c", hand / "engine/engine.c"):
        with open(target, "a") as handle:
            handle.write(f"/* tuned {uuid.uuid4().hex[:8]} */\n")
    start = time.perf_counter()
    run(eb(ws, "image", "demo", *AMD64), cwd=ws, env=env)
    ours = time.perf_counter() - start
    rows.append(Row("i1. rebuild after an engine source edit", ours, docker_build(hand, "enginebuild-bench/hand:i"),
                    "s", "python BUILD.py image demo   (engine.c edited: the engine component rebuilds)",
                    "docker build of the hand-written Dockerfile (the engine RUN rebuilds)"))
    # a runtime system package: enginebuild writes one layer; the hand-written image's first layer changes
    spec = ws / "images/demo/image.yaml"
    spec.write_text(spec.read_text().replace("packages: [busybox-static, python3, libstdc++6]",
                                             "packages: [busybox-static, python3, libstdc++6, jq]", 1))
    run(eb(ws, "lock", "demo"), cwd=ws, env=env)
    start = time.perf_counter()
    run(eb(ws, "image", "demo", *AMD64), cwd=ws, env=env)
    ours = time.perf_counter() - start
    with tarfile.open(hand / "sysroot.tar", "a") as tar:  # a package added to the base layer
        info = tarfile.TarInfo("usr/share/doc/jq/bench-added")
        data = uuid.uuid4().hex.encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    rows.append(Row("i2. rebuild after adding a runtime package", ours, docker_build(hand, "enginebuild-bench/hand:i"),
                    "s", "python BUILD.py image demo   (jq added to system.packages: 0 components rebuilt)",
                    "docker build of the hand-written Dockerfile (its first layer changed: everything recompiles)"))
    return rows


def _normalize_time(raw: Path) -> float:
    code = ("import sys, time; from pathlib import Path; from enginebuild.execution.normalize import normalize_layer;"
            "from enginebuild.io.tars import TarWriter; import hashlib\n"
            "class Sink:\n  def __init__(self): self.h = hashlib.sha256()\n"
            "  def write(self, b): self.h.update(b); return len(b)\n  def flush(self): pass\n"
            "s = time.perf_counter(); w = TarWriter(Sink(), mtime=1); normalize_layer(Path(sys.argv[1]), w); w.close()\n"
            "print(time.perf_counter() - s)")
    proc = run([sys.executable, "-c", code, str(raw)], env={"PYTHONPATH": str(ROOT / "src")})
    return float(proc.stdout.strip().splitlines()[-1])


def bench_normalize(docker: str) -> list[Row]:
    folder = Path(tempfile.mkdtemp(prefix="eb-bench-norm-"))
    try:
        run([docker, "save", "-o", str(folder / "demo.tar"), "enginebuild/demo:latest"])
        with tarfile.open(folder / "demo.tar") as tar:
            layers = [m for m in tar.getmembers() if m.name.endswith("layer.tar")]
            tar.extractall(folder / "demo", members=layers, filter="tar")
        raws = [folder / "demo" / m.name for m in layers]
        size = sum(p.stat().st_size for p in raws)
        ours = sum(_normalize_time(p) for p in raws)
        base = sum(_sha_pass(p) for p in raws)
        rows = [Row(f"j1. normalise the demo's layers ({size / 1e6:.0f} MB)", ours, base, "s",
                    "normalize_layer over every layer of the demo (sorted, dated, owners kept, noise dropped)",
                    "one sha256 pass over the same bytes")]
        big = folder / "big.tar"
        with tarfile.open(big, "w", format=tarfile.PAX_FORMAT) as tar:
            block = os.urandom(1 << 20)
            for i in range(1024):  # 1 GiB in 1 MiB files, in 32 folders, written in no particular order
                info = tarfile.TarInfo(f"opt/model/{(i * 7) % 32:02d}/shard-{i:04d}.bin")
                info.size = len(block)
                info.mtime = time.time()
                tar.addfile(info, io.BytesIO(block[i:] + block[:i]))
        rows.append(Row("j2. normalise a 1 GiB layer", _normalize_time(big), _sha_pass(big), "s",
                        "normalize_layer of a 1 GiB layer (1024 files)", "one sha256 pass over the same bytes"))
        return rows
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def bench_arm64_cold(ws: Path, env: dict) -> Row:
    run(eb(ws, "image", "demo", "--platform", "linux/arm64"), cwd=ws, env=env)  # reproduce compares with it
    times = {}
    for platform in ("linux/amd64", "linux/arm64"):
        start = time.perf_counter()
        run(eb(ws, "reproduce", "demo", "--platform", platform), cwd=ws, env=env)
        times[platform] = time.perf_counter() - start
    return Row("k. arm64 cold demo build (qemu)", times["linux/arm64"], times["linux/amd64"], "s",
               "python BUILD.py reproduce demo --platform linux/arm64   (every layer and component, nothing reused)",
               "the same for linux/amd64 (native)")


VLLM = """description: a stock vLLM wheel
platform: linux/arm64
base: scratch
cuda-archs: ["12.1a"]
python:
  version: "3.12"
  requirements:
    - {requirement: "vllm==0.21.0", deps: false}
"""


def bench_verify(ws: Path, env: dict) -> list[Row]:
    """l1: verify with nothing kept (every binary read); l2: again, verdicts kept by file sha256."""
    folder = ws / "images/bench-vllm-wheel"
    folder.mkdir(exist_ok=True)
    (folder / "image.yaml").write_text(VLLM)
    run(eb(ws, "lock", "bench-vllm-wheel"), cwd=ws, env=env)
    run(eb(ws, "image", "bench-vllm-wheel"), cwd=ws, env=env, check=False)  # its kernel check fails: expected
    shutil.rmtree(Path(env["ENGINEBUILD_HOME"]) / "records/device-code", ignore_errors=True)
    times = []
    for _ in range(2):
        start = time.perf_counter()
        proc = run(eb(ws, "verify", "bench-vllm-wheel", "--json"), cwd=ws, env=env, check=False)
        times.append(time.perf_counter() - start)
        assert proc.returncode == 1, proc.stdout + proc.stderr
    pin = json.loads((ws / "lockfiles/bench-vllm-wheel.lock").read_text())["inputs"]["runtime.python@linux/arm64"]
    sha = pin["resolved"]["packages"][0]["sha256"]
    wheel = Path(env["ENGINEBUILD_HOME"]) / "cas/sha256" / sha[:2] / sha
    gb = wheel.stat().st_size / 1e9
    baseline = _sha_pass(wheel)
    return [Row(f"l1. verify, vLLM wheel image, first run ({times[0] / gb:.1f} s/GB of wheel)", times[0], baseline,
                "s", "python BUILD.py verify bench-vllm-wheel   (every binary read; finds vllm/_C.abi3.so "
                     "without sm_121a)", "one sha256 pass over the wheel"),
            Row(f"l2. verify again, verdicts kept by sha256 ({times[1] / gb:.1f} s/GB of wheel)", times[1], baseline,
                "s", "the same, with what each binary carries kept by its sha256",
                "one sha256 pass over the wheel")]


def bench_secret_scan(ws: Path, env: dict, registry: str) -> Row:
    repo = f"{registry}/enginebuild-bench/scan-{uuid.uuid4().hex[:8]}"
    scratch = dict(env, ENGINEBUILD_HOME=tempfile.mkdtemp(prefix="eb-bench-scan-"))
    shutil.copytree(Path(env["ENGINEBUILD_HOME"]) / "cas", Path(scratch["ENGINEBUILD_HOME"]) / "cas")
    shutil.copytree(Path(env["ENGINEBUILD_HOME"]) / "records", Path(scratch["ENGINEBUILD_HOME"]) / "records",
                    ignore=shutil.ignore_patterns("secret-scan"))
    start = time.perf_counter()
    run(eb(ws, "push", "demo", *AMD64, "--no-attach", "--to", repo, "--tag", "first"), cwd=ws, env=scratch)
    first = time.perf_counter() - start
    start = time.perf_counter()
    run(eb(ws, "push", "demo", *AMD64, "--no-attach", "--to", repo, "--tag", "again"), cwd=ws, env=scratch)
    again = time.perf_counter() - start
    shutil.rmtree(scratch["ENGINEBUILD_HOME"], ignore_errors=True)
    return Row("m. push with its secret scan, layers seen before", again, first, "s",
               "python BUILD.py push demo   (the rules' verdict on each layer kept)",
               "the first push of the same image (every layer scanned, uploaded)")


def docker_client() -> str:
    return os.environ.get("ENGINEBUILD_DOCKER", "/usr/bin/docker")


if __name__ == "__main__":
    print("run through bench/run.py --only h,i,j,k,l,m", file=sys.stderr)
    subprocess.run([sys.executable, str(Path(__file__).with_name("run.py")), "--only", "h,i,j,k,l,m"], check=False)


def load_floor(ref: str, repeat: int = 5) -> float:
    """Median seconds the engine takes to load an image that adds one small new layer to `ref`
    (the layers it has are left out of the archive, as enginebuild's file-edit path does), asked
    through its API from this process: no interpreter start, no CLI."""
    sys.path.insert(0, str(ROOT / "src"))
    from enginebuild.io.tars import TarWriter
    from enginebuild.oci.engine import Engine
    from enginebuild.oci.image import DockerArchive, Layer, canonical

    found = json.loads(run(["docker", "image", "inspect", ref]).stdout)[0]
    base = [Layer(diff_id, 0, "base") for diff_id in found["RootFS"]["Layers"]]
    folder = Path(tempfile.mkdtemp(prefix="eb-bench-floor-"))
    times = []
    try:
        for _ in range(repeat):
            body = io.BytesIO()
            writer = TarWriter(body)
            writer.add_bytes("opt/floor.sh", f"#!/bin/sh\n# {uuid.uuid4().hex}\n".encode(), 0o755)
            writer.close()
            sha = hashlib.sha256(body.getvalue()).hexdigest()
            (folder / sha).write_bytes(body.getvalue())
            layers = base + [Layer(f"sha256:{sha}", len(body.getvalue()), "floor", sha)]
            config = canonical({"architecture": found["Architecture"], "os": found["Os"], "config": found["Config"],
                                "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]}})
            archive = DockerArchive(config, layers, len(base), lambda name: folder / name, ["enginebuild-bench/floor:x"])
            chunks = [bytes(chunk) for chunk in archive.chunks()]
            start = time.perf_counter()
            Engine().load(chunks, archive.size)
            times.append(time.perf_counter() - start)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        run(["docker", "rmi", "enginebuild-bench/floor:x"], check=False)
    return sorted(times)[len(times) // 2]
