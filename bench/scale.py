"""o. vLLM at real scale (`vllm-pypi`: 199 distributions, 4 GiB of wheels), linux/amd64, each
figure beside a hand-written Dockerfile that installs the same pinned requirements with
`pip install --require-hashes --no-deps` on the same base (bench/handwritten/vllm.Dockerfile:
the runtime's Debian system layers, exported from enginebuild's chain image, and pip run from
its wheel):

o0. cold build, store empty (every wheel downloaded) vs the hand-written build with no cache
o0f. the same image again with every layer in the store and none in the engine: what the
    engine takes to register 9.5 GB of layers, a floor for any build that ends in this engine
o1. cold build, store warm (every download in the store, no layer written) vs the hand-written
    build with pip's download cache warm (a BuildKit cache mount) and no layer reused
o2. image size and o3. layer count, vs the hand-written image
o4. enginebuild's peak RSS during o0, vs the goal (1 GiB)
o5. push to an empty repository of the local registry: seconds and bytes, vs `docker push`
o6. bytes pushed after an edit of the launcher, vs the hand-written image after the same edit
    (what the registry's storage gained, manifests included, for both)
o7. bytes pushed after bumping one small distribution (pip), vs the hand-written image
o8. `reproduce` (everything rebuilt in a scratch store, compared) vs the o1 build
o9. `verify` (every CUDA binary of the image read) vs `docker save` of the image to /dev/null
"""
from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from common import ROOT, Row, eb, run

AMD64 = ("--platform", "linux/amd64")
DOCKER = os.environ.get("ENGINEBUILD_DOCKER", "/usr/bin/docker")
IMAGE = "vllm-pypi"
HAND = "enginebuild-bench/hand-vllm"


def _requirements(ws: Path) -> str:
    """The lock's closure as a hash-checking requirements file (what a careful recipe commits)."""
    lock = json.loads((ws / f"lockfiles/{IMAGE}.lock").read_text())
    packages = lock["inputs"]["runtime.python@linux/amd64"]["resolved"]["packages"]
    return "".join(f"{p['name']}=={p['version']} --hash=sha256:{p['sha256']}\n" for p in packages)


def _timed_build(ws: Path, env: dict) -> tuple[float, int]:
    """Seconds and peak RSS (bytes) of `image` in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    run(eb(ws, "image", IMAGE, *AMD64), cwd=ws, env=env)
    seconds = time.perf_counter() - start
    return seconds, max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) * 1024


def _hand_context(ws: Path, env: dict, folder: Path) -> Path:
    """The base (system layers from the chain image), the requirements, pip's wheel (from the
    store of `env`, after a build) and the scripts."""
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "bench/handwritten/vllm.Dockerfile", folder / "Dockerfile")
    system_tar(ws, env, IMAGE, folder / "system.tar")
    (folder / "requirements.txt").write_text(_requirements(ws))
    shutil.copy("/etc/ssl/certs/ca-certificates.crt", folder / "ca.pem")
    lock = json.loads((ws / f"lockfiles/{IMAGE}.lock").read_text())
    pip = next(p for p in lock["inputs"]["runtime.python@linux/amd64"]["resolved"]["packages"] if p["name"] == "pip")
    shutil.copy(Path(env["ENGINEBUILD_HOME"]) / "cas/sha256" / pip["sha256"][:2] / pip["sha256"], folder / "pip.whl")
    for name in ("launch_vllm.sh", "launch_vllm_ar.sh"):
        shutil.copy(ws / "images/spark-vllm" / name, folder / name)
    for name in ("wait_for_server.sh", "bench.sh"):
        shutil.copy(ws / "images/spark-base" / name, folder / name)
    return folder


def system_tar(ws: Path, env: dict, image: str, out: Path, more: str = "") -> None:
    """The base a hand-written Dockerfile starts from: the image's runtime system layers alone
    (the spec without its Python, files and kernels; `more`: other keys to drop), exported."""
    name = f"bench-{image}-base"
    (ws / "images" / name).mkdir(exist_ok=True)
    (ws / "images" / name / "image.yaml").write_text(
        f"extends: {image}\nplatforms: [linux/amd64]\npython: null\nfiles: null\ncuda-archs: null\n{more}")
    run(eb(ws, "lock", name), cwd=ws, env=env)
    run(eb(ws, "image", name), cwd=ws, env=env)
    container = run([DOCKER, "create", f"enginebuild/{name}:latest", "/nothing"]).stdout.strip()
    try:
        run([DOCKER, "export", "-o", str(out), container])
    finally:
        run([DOCKER, "rm", container])
    run([DOCKER, "rmi", "-f", f"enginebuild/{name}:latest"], check=False)


def _engine_without_image() -> None:
    """No image in the engine holds a layer of the image (an earlier run's image, its chain
    images, untagged ones): o0's load is a real one (the engine skips a layer it already has).
    Every chain image goes (they are enginebuild's cache of what it loaded: a later build loads
    what it needs again)."""
    run([DOCKER, "rmi", "-f", f"enginebuild/{IMAGE}:latest", f"enginebuild/{IMAGE}:latest-amd64"], check=False)
    chains = [f"enginebuild/chain:{t}" for t in _chain_tags()]
    for refs in (chains[i:i + 50] for i in range(0, len(chains), 50)):
        run([DOCKER, "rmi", "-f", *refs], check=False)
    run([DOCKER, "image", "prune", "-f", "--filter", f"label=org.opencontainers.image.title={IMAGE}"], check=False)


def _chain_tags() -> list[str]:
    return run([DOCKER, "image", "ls", "enginebuild/chain", "--format", "{{.Tag}}"]).stdout.split()


HAND_IDS: list[str] = []  # each hand-written image built (a later build leaves the earlier one untagged)


def _hand_build(context: Path, *extra: str) -> float:
    start = time.perf_counter()
    run([DOCKER, "build", "-q", "-t", HAND, *extra, str(context)], env={"DOCKER_BUILDKIT": "1"})
    seconds = time.perf_counter() - start
    HAND_IDS.append(run([DOCKER, "image", "inspect", HAND, "--format", "{{.Id}}"]).stdout.strip())
    return seconds


def _image_facts(ref: str) -> tuple[int, int]:
    out = run([DOCKER, "image", "inspect", ref, "--format", "{{.Size}} {{len .RootFS.Layers}}"]).stdout.split()
    return int(out[0]), int(out[1])


def _registry_bytes(root: Path) -> int:
    """Bytes of the registry's blobs and manifests (0 before its first write made the folder)."""
    return sum(p.stat().st_size for p in root.rglob("data") if p.is_file()) if root.is_dir() else 0


def _drop_hand_snapshots() -> None:
    """BuildKit keeps each hand-written build's 9.5 GB install step as a snapshot after its image
    is gone: the ones no later row reuses go (pip's cache mount stays), or the run fills a
    70 GB disk before o7."""
    run([DOCKER, "rmi", "-f", HAND], check=False)
    run([DOCKER, "builder", "prune", "-af", "--filter", "type=regular"], check=False)


def _pushed(measure, push) -> tuple[float, int, int]:
    """Seconds, what the registry's storage gained (blobs and manifests: the same measure for
    both tools), and what enginebuild says it uploaded (blobs and documents; manifests not
    counted; 0 for docker push)."""
    before = measure()
    start = time.perf_counter()
    proc = push()
    seconds = time.perf_counter() - start
    reported = re.findall(r"blob\(s\) uploaded \((\d+) bytes\)", getattr(proc, "stderr", "") or "")
    return seconds, measure() - before, int(reported[-1]) if reported else 0


def _docker_push(ref: str) -> None:
    run([DOCKER, "tag", HAND, ref])
    run([DOCKER, "push", ref])
    run([DOCKER, "rmi", ref])  # the tag only


def bench_scale(ws: Path, env: dict, rows: list, registry: str, registry_root: Path | None,
                builds_only: bool = False) -> None:
    """Appends each row to `rows` as soon as it is measured. `registry_root`: the registry's
    storage folder, to count the bytes a push adds (None: bytes are not measured).
    `builds_only`: o0 to o4 and o1 (the builds and the images they make), no push, reproduce
    or verify (about a third of the time). The whole run needs about 45 GB of free disk."""
    home = Path(tempfile.mkdtemp(prefix="eb-bench-scale-home-"))
    cold_env = {**env, "ENGINEBUILD_HOME": str(home)}
    hand = Path(tempfile.mkdtemp(prefix="eb-bench-scale-")) / "ctx"
    warm = Path(tempfile.mkdtemp(prefix="eb-bench-scale-warm-"))  # o1's store: the downloads, no layer
    salt = uuid.uuid4().hex[:8]
    repo = f"{registry}/enginebuild-bench/scale-{salt}"
    size = lambda: _registry_bytes(registry_root) if registry_root else 0  # noqa: E731
    chains_before: set[str] = set()
    try:
        _engine_without_image()
        chains_before = set(_chain_tags())
        ours, rss = _timed_build(ws, cold_env)
        _engine_without_image()  # every layer in the store, none in the engine: the load alone
        floor, _ = _timed_build(ws, cold_env)
        _hand_context(ws, cold_env, hand)
        baseline = _hand_build(hand, "--no-cache", "--build-arg", f"SALT={salt}")
        rows.append(Row("o0. vLLM image cold build, store empty", ours, baseline, "s",
                        "python BUILD.py image vllm-pypi (a new, empty store: every wheel downloaded)",
                        "docker build --no-cache of bench/handwritten/vllm.Dockerfile (pip install --require-hashes)"))
        rows.append(Row("o0f. the load alone: every layer in the store, the engine holding none", floor, baseline, "s",
                        "python BUILD.py image vllm-pypi (nothing written: the engine registers the image's 9.5 GB)",
                        "the hand-written cold build (o0)"))
        ours_size, ours_layers = _image_facts(f"enginebuild/{IMAGE}:latest")
        hand_size, hand_layers = _image_facts(HAND)
        rows.append(Row("o2. vLLM image size", ours_size / 2**30, hand_size / 2**30, "GiB",
                        "docker image inspect enginebuild/vllm-pypi (Size)", "the same of the hand-written image"))
        rows.append(Row("o3. vLLM image layer count", ours_layers, hand_layers, "layers",
                        "docker image inspect enginebuild/vllm-pypi (RootFS.Layers)", "the same, hand-written"))
        rows.append(Row("o4. enginebuild peak RSS during the cold build", rss / 2**20, 1024, "MiB",
                        "the image command's peak resident set (getrusage of the child)", "the goal: 1 GiB"))
        # o1: the same downloads, no layer record: every layer written again
        shutil.copytree(home / "cas", warm / "cas", copy_function=os.link)
        shutil.rmtree(home, ignore_errors=True)
        run([DOCKER, "rmi", "-f", f"enginebuild/{IMAGE}:latest"], check=False)
        ours, _ = _timed_build(ws, {**env, "ENGINEBUILD_HOME": str(warm)})
        _drop_hand_snapshots()  # o0's: the next builds make their own
        _hand_build(hand, "--build-arg", f"SALT=warm-{salt}")  # fills pip's cache mount
        _drop_hand_snapshots()
        baseline = _hand_build(hand, "--no-cache", "--build-arg", f"SALT=warm2-{salt}")
        rows.append(Row("o1. vLLM image cold build, store warm", ours, baseline, "s",
                        "python BUILD.py image vllm-pypi (every download in the store, no layer written yet)",
                        "docker build --no-cache, pip's download cache (a BuildKit cache mount) warm"))
        if builds_only:
            return
        cold_env = {**env, "ENGINEBUILD_HOME": str(warm)}
        seconds, sent, _ = _pushed(size, lambda: run(eb(ws, "push", IMAGE, *AMD64, "--to", repo), cwd=ws, env=cold_env))
        hand_seconds, hand_sent, _ = _pushed(size, lambda: _docker_push(f"{repo}-hand:1"))
        rows.append(Row("o5. push to an empty repository", seconds, hand_seconds, "s",
                        f"python BUILD.py push vllm-pypi --to REPO ({sent / 2**30:.2f} GiB added to the registry)",
                        f"docker push of the hand-written image ({hand_sent / 2**30:.2f} GiB added)"))
        launcher = ws / "images/spark-vllm/launch_vllm.sh"
        launcher.write_text(launcher.read_text() + f"# edited {salt}\n")
        (hand / "launch_vllm.sh").write_text(launcher.read_text())
        run(eb(ws, "image", IMAGE, *AMD64), cwd=ws, env=cold_env)
        _hand_build(hand, "--build-arg", f"SALT=warm2-{salt}")
        _, sent, blobs = _pushed(size, lambda: run(eb(ws, "push", IMAGE, *AMD64, "--to", repo), cwd=ws, env=cold_env))
        _, hand_sent, _ = _pushed(size, lambda: _docker_push(f"{repo}-hand:2"))
        rows.append(Row("o6. bytes pushed after a launcher edit (the registry's gain)", sent / 1024, hand_sent / 1024,
                        "KiB", f"python BUILD.py push vllm-pypi (launch_vllm.sh edited; it reports {blobs} bytes of "
                        "blobs and documents, manifests not counted)", "docker push, the same edit"))
        spec = ws / f"images/{IMAGE}/image.yaml"
        spec.write_text(spec.read_text().replace("pip==25.3", "pip==25.2"))
        run(eb(ws, "lock", IMAGE), cwd=ws, env=cold_env)
        run(eb(ws, "image", IMAGE, *AMD64), cwd=ws, env=cold_env)
        (hand / "requirements.txt").write_text(_requirements(ws))
        _hand_build(hand, "--build-arg", f"SALT=warm2-{salt}")
        _, sent, _ = _pushed(size, lambda: run(eb(ws, "push", IMAGE, *AMD64, "--to", repo), cwd=ws, env=cold_env))
        _, hand_sent, _ = _pushed(size, lambda: _docker_push(f"{repo}-hand:3"))
        rows.append(Row("o7. bytes pushed after bumping one small distribution", sent / 2**20, hand_sent / 2**20,
                        "MiB", "python BUILD.py push vllm-pypi (pip 25.3 -> 25.2 in the spec, relocked)",
                        "docker push of the hand-written image, the same requirement"))
        start = time.perf_counter()
        verdict = run(eb(ws, "reproduce", IMAGE, *AMD64), cwd=ws, env=cold_env, check=False)
        seconds = time.perf_counter() - start
        rows.append(Row("o8. reproduce (rebuilt from the lock, compared)", seconds, ours, "s",
                        f"python BUILD.py reproduce vllm-pypi (exit {verdict.returncode}: "
                        f"{(verdict.stdout.strip().splitlines() or ['?'])[-1][:80]})", "o1's build"))
        start = time.perf_counter()
        run(eb(ws, "verify", IMAGE, *AMD64), cwd=ws, env=cold_env)
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            subprocess.run([DOCKER, "save", f"enginebuild/{IMAGE}:latest"], stdout=sink, check=True)
        rows.append(Row("o9. verify (every CUDA binary read)", seconds, time.perf_counter() - start, "s",
                        "python BUILD.py verify vllm-pypi", "docker save of the image to /dev/null"))
    finally:
        shutil.rmtree(hand.parent, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(warm, ignore_errors=True)  # 13 GB after o1
        for ref in (HAND, f"{repo}-hand:1", f"{repo}-hand:2", f"{repo}-hand:3"):
            run([DOCKER, "rmi", "-f", ref], check=False)
        # the chain images these builds loaded (9.5 GB of layers), and the image itself
        made = [f"enginebuild/chain:{t}" for t in _chain_tags() if t not in chains_before]
        for refs in (made[i:i + 50] for i in range(0, len(made), 50)):
            run([DOCKER, "rmi", "-f", *refs], check=False)
        run([DOCKER, "rmi", "-f", f"enginebuild/{IMAGE}:latest", f"enginebuild/{IMAGE}:latest-amd64"], check=False)
        if HAND_IDS:
            run([DOCKER, "rmi", "-f", *HAND_IDS], check=False)
        # our images these builds left untagged (the image of an earlier row, when a later one took its tag)
        run([DOCKER, "image", "prune", "-f", "--filter", f"label=org.opencontainers.image.title={IMAGE}"], check=False)
