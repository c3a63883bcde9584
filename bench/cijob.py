"""t. The mission's CI job at real scale (`vllm-pypi`, 199 distributions, 4 GiB of wheels,
linux/amd64): build, then push digest-pinned, each time on a fresh runner (an empty store; the
registry cache of the local registry), beside `docker build --no-cache` + `docker push` of the
hand-written Dockerfile (bench/handwritten/vllm.Dockerfile) with BuildKit's cache emptied first:

t1. cold build and push to an empty repository: `image --no-load --cache C --push --compression
    gzip-isal` (nothing loaded into the engine; the cache empty), then the pushed image pulled
    by digest into the engine and run (`vllm --version`, VLLM_TARGET_DEVICE=cpu)
t2. a second fresh runner with the cache t1 filled, pushing to another empty repository of the
    same registry: seconds, and what it downloaded (blobs in its store)
t3. after bumping one small distribution (pip 25.3 -> 25.2, relocked), a third fresh runner with
    the cache, pushing to t2's repository: seconds and bytes pushed, vs the hand-written build
    of the same bump on an empty BuildKit cache and its push to the repository holding t1's
Peak RSS of each of ours (`/usr/bin/time -f %M`).
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from common import Row, eb, run
from scale import AMD64, DOCKER, HAND, IMAGE, _hand_context, _registry_bytes, _requirements

GOAL_RSS_MIB = 1024


def _job(ws: Path, env: dict, home: Path, cache: str, target: str) -> tuple[float, int, str, str]:
    """One fresh runner's `image --no-load --push`: seconds, peak RSS (bytes), the pushed
    digest, and what it said."""
    argv = ["/usr/bin/time", "-f", "peak-rss-kib %M", *eb(ws, "image", IMAGE, *AMD64, "--no-load", "--cache", cache,
                                                          "--push", "--to", target, "--compression", "gzip-isal")]
    start = time.perf_counter()
    proc = run(argv, cwd=ws, env={**env, "ENGINEBUILD_HOME": str(home)})
    seconds = time.perf_counter() - start
    said = proc.stdout + proc.stderr
    rss = int(re.findall(r"peak-rss-kib (\d+)", proc.stderr)[-1]) * 1024
    digest = proc.stdout.strip().splitlines()[-1].rsplit("@", 1)[1]
    return seconds, rss, digest, said


def _stored(home: Path) -> tuple[int, int]:
    """Blobs in a store, and their bytes."""
    files = [p for p in (home / "cas").rglob("*") if p.is_file()] if (home / "cas").is_dir() else []
    return len(files), sum(p.stat().st_size for p in files)


def _pushed_bytes(said: str) -> int:
    found = re.findall(r"blob\(s\) uploaded \((\d+) bytes\)", said)
    return int(found[-1]) if found else 0


def _hand_job(context: Path, ref: str, salt: str) -> float:
    """The hand-written CI job on a fresh runner: BuildKit's cache emptied, `docker build
    --no-cache`, `docker push`; seconds."""
    run([DOCKER, "builder", "prune", "-af"], check=False)
    start = time.perf_counter()
    run([DOCKER, "build", "-q", "--no-cache", "-t", ref, "--build-arg", f"SALT={salt}", str(context)],
        env={"DOCKER_BUILDKIT": "1"})
    run([DOCKER, "push", ref])
    return time.perf_counter() - start


def _drop(ref: str) -> None:
    run([DOCKER, "rmi", "-f", ref], check=False)
    run([DOCKER, "builder", "prune", "-af"], check=False)


def _runs(ref: str) -> str:
    """`vllm --version` in the pulled image (vLLM on a machine without a GPU is told its device);
    when the CLI stops before it parses the flag, the version Python imports."""
    out = run([DOCKER, "run", "--rm", "-e", "VLLM_TARGET_DEVICE=cpu", "--entrypoint", "vllm", ref, "--version"],
              check=False)
    if out.returncode == 0 and out.stdout.strip():
        return f"`vllm --version`: {out.stdout.strip().splitlines()[-1]}"
    code = "import vllm; print(vllm.__version__)"
    out = run([DOCKER, "run", "--rm", "-e", "VLLM_TARGET_DEVICE=cpu", "--entrypoint", "python3", ref, "-c", code])
    return f"`import vllm`: {out.stdout.strip().splitlines()[-1]} (`vllm --version` exited nonzero without a GPU)"


def bench_ci_job(ws: Path, env: dict, rows: list, registry: str, registry_root: Path) -> None:
    """`registry_root`: the registry's storage folder (the bytes each push adds there)."""
    size = lambda: _registry_bytes(registry_root)  # noqa: E731
    salt = uuid.uuid4().hex[:8]
    cache = f"{registry}/enginebuild-bench/ci-cache-{salt}"
    first, second = f"{registry}/enginebuild-bench/ci-{salt}", f"{registry}/enginebuild-bench/ci2-{salt}"
    hand_repo = f"{registry}/enginebuild-bench/ci-hand-{salt}"
    scratch = Path(tempfile.mkdtemp(prefix="eb-bench-cijob-"))
    homes = [scratch / f"runner{i}" for i in range(3)]
    context = scratch / "ctx"
    pulled = ""
    try:
        run([DOCKER, "builder", "prune", "-af"], check=False)
        before = size()
        t1, rss1, digest, said = _job(ws, env, homes[0], cache, first)
        sent1 = size() - before
        _hand_context(ws, {**env, "ENGINEBUILD_HOME": str(homes[0])}, context)
        shutil.rmtree(homes[0], ignore_errors=True)  # 17 GB: wheels, layers, their gzip
        before = size()
        hand1 = _hand_job(context, f"{hand_repo}:1", salt)
        hand_sent1 = size() - before
        _drop(f"{hand_repo}:1")
        pulled = f"{first}@{digest}"
        run([DOCKER, "pull", pulled])
        ran = _runs(pulled)
        run([DOCKER, "rmi", "-f", pulled], check=False)
        rows.append(Row("t1. CI job at real scale, fresh runner: cold build and push to an empty repository", t1, hand1,
                        "s", f"python BUILD.py image vllm-pypi --no-load --cache C --push --to R --compression "
                             f"gzip-isal ({sent1 / 2**30:.2f} GiB added to the registry, cache included; "
                             f"peak RSS {rss1 / 2**20:.0f} MiB; "
                             f"pulled by digest and run: {ran})",
                        f"docker build --no-cache + docker push of the hand-written image, BuildKit cache emptied "
                        f"({hand_sent1 / 2**30:.2f} GiB added)"))

        t2, rss2, digest2, said = _job(ws, env, homes[1], cache, second)
        blobs, stored = _stored(homes[1])
        rows.append(Row("t2. the same on a second fresh runner, the layers in the registry cache", t2, hand1, "s",
                        f"python BUILD.py image vllm-pypi --no-load --cache C --push --to R2 (the same digest: "
                        f"{digest2 == digest}; downloaded: {blobs} blobs, {stored} bytes; "
                        f"{_pushed_bytes(said)} bytes pushed; peak RSS {rss2 / 2**20:.0f} MiB)",
                        "the hand-written fresh runner (t1)"))

        spec = ws / f"images/{IMAGE}/image.yaml"
        spec.write_text(spec.read_text().replace("pip==25.3", "pip==25.2"))
        run(eb(ws, "lock", IMAGE), cwd=ws, env={**env, "ENGINEBUILD_HOME": str(scratch / "locking")})
        shutil.rmtree(scratch / "locking", ignore_errors=True)
        (context / "requirements.txt").write_text(_requirements(ws))
        lock = json.loads((ws / f"lockfiles/{IMAGE}.lock").read_text())
        assert any(p["name"] == "pip" and p["version"] == "25.2"
                   for p in lock["inputs"]["runtime.python@linux/amd64"]["resolved"]["packages"])
        before = size()
        t3, rss3, _, said = _job(ws, env, homes[2], cache, second)
        sent3, reported3 = size() - before, _pushed_bytes(said)
        shutil.rmtree(homes[2], ignore_errors=True)
        before = size()
        hand3 = _hand_job(context, f"{hand_repo}:2", salt)
        hand_sent3 = size() - before
        _drop(f"{hand_repo}:2")
        stood = re.search(r"(\d+) layer\(s\) stood in by \S+ \(made and pushed elsewhere\); (\d+) to make here", said)
        made = f"{stood.group(1)} layers stood in, {stood.group(2)} made" if stood else "no layer stood in"
        rows.append(Row("t3. after bumping one small distribution, a third fresh runner with the cache", t3, hand3, "s",
                        f"python BUILD.py image vllm-pypi --no-load --cache C --push --to R2 (pip 25.3 -> 25.2: "
                        f"{made}; peak RSS {rss3 / 2**20:.0f} MiB)",
                        "the hand-written fresh runner, the same bump"))
        rows.append(Row("t3b. bytes pushed after that bump (what the registry's storage gained)", sent3 / 2**20,
                        hand_sent3 / 2**20, "MiB", f"t3's push and cache entries (it reports {reported3} bytes of "
                        "blobs and documents uploaded)", "docker push of the hand-written image after the same bump"))
        rows.append(Row("t4. peak RSS of the three runs (t1, t2, t3) vs the goal", max(rss1, rss2, rss3) / 2**20,
                        GOAL_RSS_MIB, "MiB", "/usr/bin/time -f %M of each image --push", "the goal: 1 GiB"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        for ref in (f"{hand_repo}:1", f"{hand_repo}:2", HAND, pulled):
            if ref:
                run([DOCKER, "rmi", "-f", ref], check=False)
        run([DOCKER, "image", "prune", "-f", "--filter", f"label=org.opencontainers.image.title={IMAGE}"],
            check=False)
