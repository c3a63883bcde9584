"""w. What a fresh container pays before it serves: `qwen36-dflash-pypi` (linux/amd64), built with its
bytecode (the default) and without it (`--set bytecode=false`, what every image shipped before), and
the hand-written Dockerfile of the r rows built twice: as it is (`pip install --no-compile`) and
with pip's default (compiled at install, timestamp `.pyc`s).

w1. a fresh container (`docker run --rm`) to `import vllm.v1.worker.gpu_model_runner` done, the
    median of ROUNDS (9), each image side by side in every round: ours with bytecode vs ours without
w2. the same, ours with bytecode vs the hand-written image compiled by pip
w3. `vllm serve --help` in a fresh container, ours with bytecode vs ours without
w4. the image's size, with bytecode vs without (MiB)
w0. a bare container start (`python3 -c pass`), for scale

One container's time spreads by 10-20 % on a 2-CPU virtual machine (9.1-17.1 s for one image in
one run), so a median of 5 can land on either side of a 5 % difference: w1 and w2 also print each
pair's per-round ratio (mean and standard deviation) and the import's own seconds as the
interpreter measured them (no container start or teardown in them).
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import Row, eb, run
from mission import IMAGE, _hand_context
from scale import DOCKER

AMD64 = ("--platform", "linux/amd64")
OURS, BARE = "enginebuild-bench/q36-bytecode", "enginebuild-bench/q36-no-bytecode"
HAND_NO, HAND_PIP = "enginebuild-bench/q36-hand-no-compile", "enginebuild-bench/q36-hand-pip-compiled"
IMPORT = "import vllm.v1.worker.gpu_model_runner"
TIMED = f"import time; t = time.perf_counter(); {IMPORT}; print('import-seconds', time.perf_counter() - t)"
ROUNDS = int(os.environ.get("ENGINEBUILD_BENCH_START_ROUNDS", "9"))


class Failed(Exception):
    pass


def _started(image: str, *argv: str) -> tuple[float, float | None]:
    """Seconds from `docker run` to the container gone, and the seconds the program printed as
    `import-seconds N` (None where it printed none)."""
    start = time.perf_counter()
    done = subprocess.run([DOCKER, "run", "--rm", "--network", "none", "--entrypoint", argv[0], image, *argv[1:]],
                          capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise Failed(f"{' '.join(argv)} in {image} failed: {(done.stderr or done.stdout)[-300:]}")
    inner = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("import-seconds ")]
    return took, float(inner[-1]) if inner else None


class Timings:
    """Each image's seconds per round, in turn (a busy moment of the machine falls on all of them)."""

    def __init__(self, images: list[str], argv: tuple[str, ...], rounds: int = ROUNDS):
        self.wall: dict[str, list[float]] = {image: [] for image in images}
        self.inner: dict[str, list[float]] = {image: [] for image in images}
        for _ in range(rounds):
            for image in images:
                took, inner = _started(image, *argv)
                self.wall[image].append(took)
                if inner is not None:
                    self.inner[image].append(inner)

    def median(self, image: str) -> float:
        return statistics.median(self.wall[image])

    def paired(self, ours: str, theirs: str) -> str:
        """Each round's ratio ours/theirs (both run in that round), and the in-process imports'."""
        ratios = [a / b for a, b in zip(self.wall[ours], self.wall[theirs], strict=True)]
        spread = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
        said = (f"{ours.rsplit('/', 1)[1]} / {theirs.rsplit('/', 1)[1]} per round: mean {statistics.mean(ratios):.3f}, "
                f"sd {spread:.3f}, n {len(ratios)}")
        if self.inner[ours] and self.inner[theirs]:
            said += (f"; the import alone (in the interpreter): {statistics.median(self.inner[ours]):.2f} s vs "
                     f"{statistics.median(self.inner[theirs]):.2f} s")
        return said


def _size_mib(image: str) -> float:
    out = run([DOCKER, "image", "inspect", "--format", "{{.Size}}", image]).stdout.strip()
    return int(out) / 2**20


def bench_start(ws: Path, env: dict, rows: list) -> None:
    """About 25 GB of disk and 30 min (9 rounds): a store of its own, four images."""
    home = Path(tempfile.mkdtemp(prefix="eb-bench-start-home-"))
    env = {**env, "ENGINEBUILD_HOME": str(home)}
    hand = Path(tempfile.mkdtemp(prefix="eb-bench-start-")) / "ctx"
    try:
        start = time.perf_counter()
        run(eb(ws, "image", IMAGE, *AMD64, "-t", OURS), cwd=ws, env=env)
        print(f"  w: built {IMAGE} with bytecode in {time.perf_counter() - start:.0f}s", flush=True)
        start = time.perf_counter()
        run(eb(ws, "image", IMAGE, *AMD64, "--set", "bytecode=false", "-t", BARE), cwd=ws, env=env)
        print(f"  w: built it without bytecode in {time.perf_counter() - start:.0f}s", flush=True)
        _hand_context(ws, env, hand)
        run([DOCKER, "build", "-q", "-t", HAND_NO, str(hand)], env={"DOCKER_BUILDKIT": "1"})
        dockerfile = hand / "Dockerfile"
        dockerfile.write_text(dockerfile.read_text().replace(" --no-compile", ""))
        run([DOCKER, "build", "-q", "-t", HAND_PIP, str(hand)], env={"DOCKER_BUILDKIT": "1"})
        images = [OURS, BARE, HAND_PIP, HAND_NO]
        starts = Timings(images, ("python3", "-c", "pass"))
        timed = Timings(images, ("python3", "-c", TIMED))
        bare = {image: starts.median(image) for image in images}
        imports = {image: timed.median(image) for image in images}
        said = ", ".join(f"{name.rsplit('/', 1)[1]} {imports[name]:.2f} s" for name in images)
        print(f"  w: {IMPORT}: {said}; bare start: " + ", ".join(f"{bare[n]:.2f} s" for n in images), flush=True)
        print(f"  w1: {timed.paired(OURS, BARE)}", flush=True)
        print(f"  w2: {timed.paired(OURS, HAND_PIP)}", flush=True)
        rows.append(Row("w1. fresh container to the model runner imported", imports[OURS], imports[BARE], "s",
                        f"docker run {IMAGE} (bytecode: the checked-hash .pyc of every Python layer) "
                        f"python3 -c '{IMPORT}', median of {ROUNDS}",
                        "the same image built with bytecode: false (no .pyc: what every image shipped before)"))
        rows.append(Row("w2. the same, vs the hand-written image compiled by pip", imports[OURS], imports[HAND_PIP], "s",
                        "as w1", "bench/handwritten/vllm-patched.Dockerfile without --no-compile (pip's default: "
                        f"timestamp .pyc written at install); as it ships (--no-compile): {imports[HAND_NO]:.2f} s"))
        try:  # vLLM's CLI infers the device before it parses --help: without a GPU it stops
            helps = Timings([OURS, BARE], ("vllm", "serve", "--help"))
            rows.append(Row("w3. fresh container to `vllm serve --help` printed", helps.median(OURS), helps.median(BARE),
                            "s", f"docker run ... vllm serve --help, median of {ROUNDS}, with bytecode",
                            "without bytecode"))
        except Failed as failed:
            print(f"  w3: not measured here: {failed}", flush=True)
        rows.append(Row("w4. image size", _size_mib(OURS), _size_mib(BARE), "MiB", "with bytecode",
                        f"without; the pip-compiled hand-written image {_size_mib(HAND_PIP):.0f} MiB, "
                        f"--no-compile {_size_mib(HAND_NO):.0f} MiB"))
        rows.append(Row("w0. a bare container start (python3 -c pass)", bare[OURS], bare[BARE], "s",
                        "with bytecode", "without: the floor under w1-w3"))
        layers = {name: len(json.loads(run([DOCKER, "image", "inspect", "--format", "{{json .RootFS.Layers}}",
                                                name]).stdout)) for name in images}
        print("  w: layers: " + ", ".join(f"{n.rsplit('/', 1)[1]} {c}" for n, c in layers.items()), flush=True)
    finally:
        if os.environ.get("ENGINEBUILD_BENCH_KEEP"):
            print("  w: images kept (ENGINEBUILD_BENCH_KEEP): " + " ".join((OURS, BARE, HAND_NO, HAND_PIP)), flush=True)
        else:
            run([DOCKER, "rmi", "-f", OURS, BARE, HAND_NO, HAND_PIP, f"enginebuild/{IMAGE}:latest",
                 f"enginebuild/{IMAGE}:latest-amd64"], check=False)
        run([DOCKER, "builder", "prune", "-af", "--filter", "type=regular"], check=False)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(hand.parent, ignore_errors=True)
