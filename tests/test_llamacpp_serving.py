"""An engine that really serves: the catalogue's `llamacpp-cpu` image (llama.cpp compiled from the
pinned llama-cpp-python sdist by enginebuild, the Spark llama.cpp launcher and scripts, the pinned
llama-benchy) runs the recipe workflow against a tiny GGUF model generated here and mounted at
/models: `docker run -d`, `wait_for_server.sh`, `bench.sh` writing llama-benchy's JSON, `docker stop`.
A flag the engine refuses or a library it cannot load fails with the engine's own words (the
container's log is the assertion message)."""
from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
import uuid

import pytest

from conftest import ROOT, run_cli
from helpers.docker import docker

pytestmark = [pytest.mark.docker, pytest.mark.network]

NATIVE = {"x86_64": "linux/amd64", "aarch64": "linux/arm64"}.get(platform.machine(), "linux/amd64")
LOADER = {"linux/amd64": "/lib64/ld-linux-x86-64.so.2", "linux/arm64": "/lib/ld-linux-aarch64.so.1"}[NATIVE]


@pytest.fixture(scope="module")
def image(docker_engine, debian_reachable, pypi_reachable, tmp_path_factory):
    """The image built from the committed spec and lock, for this machine's platform, compiled
    without optimisation flags (`CMAKE_BUILD_TYPE=None`, the build script's knob: half the
    compile of the catalogue's Release build, the suite's longest step on two cores; nothing
    asserted here depends on the optimisation level, and bench n compiles the Release build)."""
    workspace = tmp_path_factory.mktemp("llamacpp-repo")
    for part in ("images", "patches", "lockfiles"):
        shutil.copytree(ROOT / part, workspace / part)
    proc = run_cli(["image", "llamacpp-cpu", "--platform", NATIVE,
                    "--set", "components[llama.cpp].build.args.CMAKE_BUILD_TYPE=None"], workspace, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout.split("-> ")[-1].split()[0].strip()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models") / "tiny"
    subprocess.run([sys.executable, str(ROOT / "scripts/make-tiny-gguf.py"), "--dir", str(folder)], check=True)
    folder.chmod(0o755)
    return folder


class Server:
    """`docker run -d` of the image with the model folder mounted read-only at /models."""

    def __init__(self, image: str, model, env: dict | None = None):
        self.name = f"eb-llama-{uuid.uuid4().hex[:10]}"
        args = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
        docker("run", "-d", "--name", self.name, "-v", f"{model}:/models:ro", *args, image)

    def logs(self) -> str:
        out = docker("logs", self.name, check=False)
        return out.stdout + out.stderr

    def exec(self, *argv: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
        extra = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
        return docker("exec", *extra, self.name, *argv, check=False, timeout=timeout)

    def wait(self) -> None:
        waited = self.exec("/opt/enginebuild/bin/wait_for_server.sh", "http://127.0.0.1:8012", "120")
        assert waited.returncode == 0, f"{waited.stdout}{waited.stderr}\n--- engine log ---\n{self.logs()}"

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        docker("rm", "-f", self.name, check=False)


def test_the_recipe_workflow_runs_wait_bench_and_a_clean_stop(image, model):
    # the tiny model may end a reply at its first token for some of the book's prompts (llama-benchy
    # picks them at random), which leaves no generation speed to measure: EOS is ignored here
    with Server(image, model, env={"EXTRA_ARGS": "--ignore-eos"}) as server:
        server.wait()
        listed = json.loads(server.exec("wget", "-q", "-O", "-", "http://127.0.0.1:8012/v1/models").stdout)
        assert [m["id"] for m in listed["data"]] == ["tiny"]
        launched = server.logs()
        # the launcher's flags, as the engine at this pin names them, were accepted: it serves
        assert "--spec-type ngram-simple --spec-ngram-simple-size-m 16" in launched, launched
        # and n-gram speculation drafts for real once greedy output repeats itself
        request = json.dumps({"prompt": "the of the of the of", "max_tokens": 512, "temperature": 0, "ignore_eos": True})
        answer = json.loads(server.exec("wget", "-q", "-O", "-", "--header", "Content-Type: application/json",
                                        "--post-data", request, "http://127.0.0.1:8012/v1/completions").stdout)
        assert answer["usage"]["completion_tokens"] == 512
        assert answer["timings"]["draft_n"] > 0 and answer["timings"]["draft_n_accepted"] > 0, answer["timings"]

        bench = server.exec("/opt/enginebuild/bin/bench.sh", "--skip-coherence", env={
            "BENCH_PP": "128", "BENCH_TG": "16", "BENCH_RUNS": "1", "BENCH_BOOK": "/models/book.txt",
            "BENCH_RESULT": "/tmp/bench.json"})
        assert bench.returncode == 0, bench.stdout[-3000:] + bench.stderr[-3000:]
        result = json.loads(server.exec("cat", "/tmp/bench.json").stdout)
        assert result["model"] == "tiny"
        (run,) = result["benchmarks"]
        assert (run["prompt_size"], run["response_size"], run["concurrency"]) == (128, 16, 1)
        assert run["pp_throughput"]["mean"] > 0 and run["tg_throughput"]["mean"] > 0

        # SIGTERM ends llama-server (PID 1 through the launcher's exec): no SIGKILL after the grace time
        docker("stop", "-t", "30", server.name, timeout=60)
        state = json.loads(docker("inspect", server.name).stdout)[0]["State"]
        assert state["ExitCode"] != 137 and not state["OOMKilled"], (state, server.logs())


def test_the_runtime_carries_exactly_the_libraries_llama_server_loads(image):
    listed = docker("run", "--rm", "--entrypoint", LOADER, image, "--list", "/usr/local/bin/llama-server").stdout
    assert "not found" not in listed, listed
    loaded = {line.split("=>")[1].split()[0] for line in listed.splitlines() if "=> /usr/local/lib/" in line}
    # what the image ships there: each entry, and where a link points
    shipped = docker("run", "--rm", "--entrypoint", "/bin/sh", image, "-c",
                     'cd /usr/local/lib && for f in lib*; do echo "$f $(readlink "$f")"; done').stdout
    links = dict((line.split() + [""])[:2] for line in shipped.splitlines())
    reached = set()
    for path in loaded:
        name = path.rsplit("/", 1)[1]
        while name and name not in reached:
            reached.add(name)
            name = links.get(name, "")
    assert {"libllama.so.0", "libggml-cpu.so.0", "libggml-base.so.0"} <= reached, listed
    assert reached == set(links), f"shipped but never loaded: {sorted(set(links) - reached)}"


def test_a_flag_the_engine_refuses_fails_with_the_engines_own_message(image, model):
    with Server(image, model, {"EXTRA_ARGS": "--draft-max 4"}) as server:
        code = docker("wait", server.name, timeout=120).stdout.strip()
        logs = server.logs()
        assert code != "0", logs
        assert "--draft-max" in logs and "removed" in logs, logs
