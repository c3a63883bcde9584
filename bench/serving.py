"""n. llama.cpp that really serves (`llamacpp-cpu`), linux/amd64, each figure beside its baseline:

n0. cold build (every unit compiled, the compiler cache empty) vs the hand-written multi-stage
    Dockerfile (bench/handwritten/llamacpp.Dockerfile: the same toolchain, flags and script)
n1. rebuild after a one-line edit to a llama.cpp source file (a patch on tools/server/server.cpp),
    with the compiler cache, vs the hand-written Dockerfile (its compile step runs again)
n2. the same kind of edit without the compiler cache (CCACHE_DISABLE=1) vs the same baseline
n3. `docker run` to `/v1/models` answering (the tiny generated model) vs `docker run` of `true`
n4. llama-benchy through the image's bench.sh: generation vs prompt tokens per second (a figure
    of this machine, not a goal)

The image is a child spec of llamacpp-cpu with its own compiler-cache folder, so that nothing
from earlier builds is reused.
"""
from __future__ import annotations

import difflib
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
DOCKER = os.environ.get("ENGINEBUILD_DOCKER", "/usr/bin/docker")  # the engine's own client (BuildKit)
SERVER_CPP = "vendor/llama.cpp/tools/server/server.cpp"
LINE = 'SRV_INF("listening on %s\\n", address.c_str());'


def _sdist(ws: Path, env: dict) -> Path:
    lock = json.loads((ws / "lockfiles/llamacpp-cpu.lock").read_text())
    sha = lock["inputs"]["components.llama.cpp.source"]["resolved"]["sha256"]
    return Path(env["ENGINEBUILD_HOME"]) / "cas/sha256" / sha[:2] / sha  # the bench's own store


def _edit_patch(sdist: Path, salt: str) -> str:
    """A one-line change of a real statement (a log message of llama-server's main file): no
    compiler cache can take it for the old object."""
    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]
        handle = tar.extractfile(f"{top}/{SERVER_CPP}")
        assert handle is not None
        old = handle.read().decode().splitlines(keepends=True)
    new = [line.replace(LINE, LINE.replace("listening on", f"listening ({salt}) on")) for line in old]
    assert new != old, f"{SERVER_CPP} no longer has {LINE}"
    header = (f"Subject: llama-server: a benchmark edit ({salt})\nDescription: one changed statement, for the "
              "rebuild figures of bench/serving.py\nUpstream: not forwarded (benchmark only)\n---\n")
    return header + "".join(difflib.unified_diff(old, new, f"a/{SERVER_CPP}", f"b/{SERVER_CPP}"))


def _spec(args: dict, patched: bool) -> str:
    lines = ["extends: llamacpp-cpu", "platforms: [linux/amd64]", "components:", "  llama.cpp:"]
    if patched:
        lines.append("    patches: [llamacpp-bench/0001-edit.patch]")
    lines += ["    build:", "      args:"] + [f"        {k}: {json.dumps(v)}" for k, v in args.items()]
    return "\n".join(lines) + "\n"


def _build(ws: Path, env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    proc = run(eb(ws, "image", "llamacpp-bench", *AMD64), cwd=ws, env=env)
    return time.perf_counter() - start, proc.stdout.split("-> ")[-1].split()[0]


def _hand_context(ws: Path, sdist: Path, image: str, folder: Path) -> Path:
    """The builder environment (exported from the component's chain image: the same pinned
    packages), the runtime's filesystem, the sdist and the family's build script."""
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "bench/handwritten/llamacpp.Dockerfile", folder / "Dockerfile")
    rendered = run(eb(ws, "render", "llamacpp-bench", *AMD64), cwd=ws).stdout
    chain = next(line.split()[1] for line in rendered.splitlines() if line.startswith("FROM enginebuild/chain:"))
    for ref, name in ((chain, "sysroot.tar"), (image, "runtime.tar")):
        container = run([DOCKER, "create", ref, "/nothing"]).stdout.strip()
        try:
            run([DOCKER, "export", "-o", str(folder / name), container])
        finally:
            run([DOCKER, "rm", container])
    shutil.copy(sdist, folder / "llama-cpp-python.tar.gz")
    shutil.copy(ws / "images/spark-llamacpp/build_llamacpp.sh", folder)
    (folder / "edit.patch").write_text("")
    return folder


def _docker_build(context: Path, salt: str) -> float:
    start = time.perf_counter()
    run([DOCKER, "build", "-q", "-t", "enginebuild-bench/hand-llamacpp", "--build-arg", f"SALT={salt}",
         str(context)], env={"DOCKER_BUILDKIT": "1"})
    return time.perf_counter() - start


def _serve(image: str, model: Path) -> tuple[float, float, dict]:
    name = f"eb-bench-{uuid.uuid4().hex[:8]}"
    start = time.perf_counter()
    run([DOCKER, "run", "-d", "--name", name, "-p", "127.0.0.1::8012", "-v", f"{model}:/models:ro", image])
    try:
        port = run([DOCKER, "port", name, "8012"]).stdout.split(":")[-1].strip()
        while True:  # polled from outside, as a user's script would
            try:
                subprocess.run(["curl", "-fsS", "-o", "/dev/null", f"http://127.0.0.1:{port}/v1/models"], check=True,
                               capture_output=True, timeout=5)
                break
            except subprocess.CalledProcessError:
                if time.perf_counter() - start > 120:
                    raise RuntimeError(run([DOCKER, "logs", name], check=False).stderr) from None
                time.sleep(0.02)
        ready = time.perf_counter() - start
        start = time.perf_counter()
        run([DOCKER, "run", "--rm", "--entrypoint", "/bin/true", image])
        floor = time.perf_counter() - start
        run([DOCKER, "exec", "-e", "BENCH_PP=512", "-e", "BENCH_TG=128", "-e", "BENCH_RUNS=3",
             "-e", "BENCH_BOOK=/models/book.txt", "-e", "BENCH_RESULT=/tmp/bench.json", name,
             "/opt/enginebuild/bin/bench.sh", "--skip-coherence"])
        result = json.loads(run([DOCKER, "exec", name, "cat", "/tmp/bench.json"]).stdout)
        return ready, floor, result["benchmarks"][0]
    finally:
        run([DOCKER, "rm", "-f", name], check=False)


def bench_llamacpp(ws: Path, env: dict, rows: list) -> None:
    """Appends each row to `rows` as soon as it is measured."""
    salt = uuid.uuid4().hex[:8]
    folder = ws / "images/llamacpp-bench"
    folder.mkdir()
    patches = ws / "patches/llamacpp-bench"
    patches.mkdir()
    args = {"BENCH_SALT": salt, "CCACHE_DIR": f"/root/.cache/ccache/bench-{salt}"}
    (folder / "image.yaml").write_text(_spec(args, patched=False))
    run(eb(ws, "lock", "llamacpp-bench"), cwd=ws, env=env)
    sdist = _sdist(ws, env)
    ours, image = _build(ws, env)
    hand = _hand_context(ws, sdist, image, Path(tempfile.mkdtemp(prefix="eb-bench-llama-")) / "ctx")
    try:
        baseline = _docker_build(hand, salt)
        rows.append(Row("n0. llama.cpp cold build (every unit compiled)", ours, baseline, "s",
                        "python BUILD.py image llamacpp-cpu (its own empty compiler cache)",
                        "docker build of bench/handwritten/llamacpp.Dockerfile (new build arg: no layer reused)"))
        for label, extra in (("n1. one-line llama.cpp source edit, compiler cache", {}),
                             ("n2. the same edit without the compiler cache", {"CCACHE_DISABLE": "1"})):
            edit = uuid.uuid4().hex[:8]
            (patches / "0001-edit.patch").write_text(_edit_patch(sdist, edit))
            (hand / "edit.patch").write_text(_edit_patch(sdist, edit))
            (folder / "image.yaml").write_text(_spec({**args, **extra}, patched=True))
            ours, image = _build(ws, env)
            rows.append(Row(label, ours, _docker_build(hand, salt), "s",
                            "python BUILD.py image llamacpp-cpu (a patch changes one line of server.cpp)",
                            "docker build of the hand-written Dockerfile, the same patch (its compile RUN again)"))
        model = Path(tempfile.mkdtemp(prefix="eb-bench-model-")) / "tiny"
        run([sys.executable, str(ROOT / "scripts/make-tiny-gguf.py"), "--dir", str(model)])
        model.chmod(0o755)
        ready, floor, result = _serve(image, model)
        rows.append(Row("n3. docker run to /v1/models answering (tiny model)", ready, floor, "s",
                        "docker run -d -v MODEL:/models IMAGE, then curl /v1/models until it answers",
                        "docker run --rm --entrypoint /bin/true IMAGE"))
        rows.append(Row("n4. llama-benchy generation vs prompt tokens/s (pp 512, tg 128)",
                        result["tg_throughput"]["mean"], result["pp_throughput"]["mean"], "tok/s",
                        "bench.sh in the image: llama-benchy 0.3.6 tg_throughput (mean of 3)",
                        "the same run's pp_throughput (a figure of this machine, not a goal)"))
        shutil.rmtree(model.parent, ignore_errors=True)
    finally:
        shutil.rmtree(hand.parent, ignore_errors=True)
        run([DOCKER, "rmi", "-f", "enginebuild-bench/hand-llamacpp"], check=False)
