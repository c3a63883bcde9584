"""An engine that really serves: the catalogue's `llamacpp-cpu` image (llama.cpp compiled from the
pinned llama-cpp-python sdist by enginebuild, the Spark llama.cpp launcher and scripts, the pinned
llama-benchy) runs the recipe workflow against a tiny GGUF model generated here and mounted at
/models: `docker run -d`, `wait_for_server.sh`, `bench.sh` writing llama-benchy's JSON, `docker stop`.
A flag the engine refuses or a library it cannot load fails with the engine's own words (the
container's log is the assertion message)."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, need, run_cli
from helpers.docker import docker, enginebuild_tags, remove_new_tags

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
    before = enginebuild_tags()
    built = ""
    try:
        proc = run_cli(["image", "llamacpp-cpu", "--platform", NATIVE,
                        "--set", "components[llama.cpp].build.args.CMAKE_BUILD_TYPE=None"], workspace, timeout=3600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        built = proc.stdout.split("-> ")[-1].split()[0].strip()
        yield built
    finally:  # the image, its chain and the compiler's component image (1 GB) go with the module
        remove_new_tags(before, os.environ["ENGINEBUILD_HOME"], *([built, f"{built}-{NATIVE.split('/')[1]}"] if built else []))


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


# -- serving across nodes ---------------------------------------------------------------------
# Two "nodes" on one bridge: each a network namespace with its own address (a container holding
# it), the node's containers joining it as a Spark's join the host's (network container:HOLDER).
# A firewall rule in a holder's namespace is that node's firewall.

PROMPTS = [f"{word} the of and {i}" for i, word in enumerate(
    ("the", "a", "one", "two", "red", "blue", "cat", "dog", "sun", "moon",
     "rain", "snow", "tree", "road", "house", "river", "stone", "light", "night", "day"))]


@pytest.fixture(scope="module")
def fabric(image):
    from helpers.engines import worker_number
    from helpers.fabric import fabric_network

    need(os.geteuid() == 0 and shutil.which("iptables") is not None, "a link between nodes needs root and iptables")
    prefix = f"10.{90 + worker_number()}.{uuid.uuid4().int % 200 + 20}"
    with fabric_network(prefix) as name:
        holders = {"head": (f"{name}-a", f"{prefix}.2"), "worker": (f"{name}-b", f"{prefix}.3")}
        try:
            for holder, address in holders.values():
                docker("run", "-d", "--name", holder, "--network", name, "--ip", address, "--entrypoint",
                       "/bin/sleep", image, "86400")
            yield {"prefix": prefix, "holders": holders, "bridge": name}
        finally:
            for holder, _ in holders.values():
                docker("rm", "-f", holder, check=False)


def cluster_repo(path, fabric, nodes: dict, engines: dict | None = None):
    """A recipe checkout whose enginebuild.yaml lists `nodes` (name: address), each in its holder's namespace."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "images").mkdir(exist_ok=True)
    lines = ["nodes:"]
    for node, address in nodes.items():
        holder = fabric["holders"][node][0]
        where = f", host: {engines[node]}" if engines and node in engines else f', network: "container:{holder}"'
        lines.append(f"  - {{name: {node}, address: {address}{where}}}")
    (path / "enginebuild.yaml").write_text("\n".join(lines) + "\n")
    return path


def serving_containers() -> list[str]:
    return docker("ps", "-a", "--filter", "label=org.enginebuild.serve", "--format", "{{.Names}}").stdout.split()


def non_ascii_bytes(model) -> list:
    """The tiny model's byte tokens above 0x7f: alone they are not UTF-8, which the server cannot put
    in its JSON answer (HTTP 500), so the completions below never pick them."""
    vocab = json.loads((model / "tokenizer.json").read_text())["model"]["vocab"]
    return [[i, False] for i, (piece, _) in enumerate(vocab) if piece.startswith("<0x") and int(piece[3:5], 16) > 0x7f]


def complete(holder: str, address: str, prompt: str, banned: list) -> str:
    request = json.dumps({"prompt": prompt, "max_tokens": 12, "temperature": 0, "logit_bias": banned})
    out = docker("exec", holder, "wget", "-q", "-O", "-", "--header", "Content-Type: application/json",
                 "--post-data", request, f"http://{address}:8012/v1/completions")
    return json.loads(out.stdout)["choices"][0]["text"]


def served_answers(repo, image, model, fabric, cluster: str, extra: list) -> tuple[list[str], str]:
    holder, address = fabric["holders"]["head"]
    proc = run_cli(["serve", "up", image, "--cluster", cluster, "--gpus", "none", "--model", str(model),
                    "-e", "N_GPU_LAYERS=2", "-e", "CTX_SIZE=512", "-e", "SPEC_TYPE=off", "-e", "EXTRA_ARGS=-v",
                    *extra], repo, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    try:
        waited = docker("exec", holder, "/opt/enginebuild/bin/wait_for_server.sh", f"http://{address}:8012", "120",
                        check=False, timeout=180)
        logs = docker("logs", f"enginebuild-serve-{cluster}-head", check=False)
        assert waited.returncode == 0, waited.stdout + logs.stdout + logs.stderr
        banned = non_ascii_bytes(model)
        return [complete(holder, address, p, banned) for p in PROMPTS], logs.stdout + logs.stderr + proc.stderr
    finally:
        stopped = run_cli(["serve", "stop", "--cluster", cluster], repo, timeout=120)
        assert stopped.returncode == 0 and "; 0 left" in stopped.stdout, stopped.stdout + stopped.stderr


def test_llama_cpp_over_two_nodes_splits_the_layers_and_answers_as_one_node(image, model, fabric, tmp_path):
    prefix = fabric["prefix"]
    two = cluster_repo(tmp_path / "two", fabric, {"head": f"{prefix}.2", "worker": f"{prefix}.3"})
    split, said = served_answers(two, image, model, fabric, "two", [])
    # the worker's rpc-server holds the offloaded layer; the head's CPU the other
    assert "layer   0 assigned to device CPU" in said and "layer   1 assigned to device RPC0" in said, said[-4000:]
    assert f"--rpc {prefix}.3:50052" in said, said[-4000:]
    env = (Path(os.environ["ENGINEBUILD_HOME"]) / "serve/two/worker.env").read_text()
    assert "NCCL_SOCKET_IFNAME=eth0" in env and "GLOO_SOCKET_IFNAME=eth0" in env and "NCCL_IB_DISABLE=1" in env, env
    assert serving_containers() == []  # `serve stop` left nothing

    one = cluster_repo(tmp_path / "one", fabric, {"head": f"{prefix}.2"})
    alone, said = served_answers(one, image, model, fabric, "one", [])
    assert "RPC0" not in said
    assert split == alone and len(set(alone)) > 1, (split, alone)  # greedy: the same 20 answers


@pytest.fixture(scope="module")
def other_engine(docker_engine, tmp_path_factory):
    """Another machine's Docker engine (its own store), in this machine's network namespace."""
    from helpers.engines import start_engine

    need(os.geteuid() == 0 and shutil.which("dockerd") is not None and shutil.which("nsenter") is not None
         and shutil.which("iptables") is not None, "a second engine and a node's firewall need root, dockerd, "
                                                   "nsenter and iptables")
    engine = start_engine(tmp_path_factory.mktemp("node-engine"), index=9)
    yield engine
    engine.stop()


def test_a_node_on_another_engine_pulls_the_image_by_digest_and_serves_its_part(image, model, fabric, registry,
                                                                                other_engine, tmp_path):
    prefix = fabric["prefix"]
    pushed = f"{registry.host}/enginebuild-test/serve-llama:1"
    docker("tag", image, pushed)
    digest = docker("push", pushed).stdout.split("digest: ")[1].split()[0]
    ref = f"{registry.host}/enginebuild-test/serve-llama@{digest}"
    # the worker: the other engine's host network, whose address on the bridge is its gateway's
    repo = cluster_repo(tmp_path / "engines", fabric, {"head": f"{prefix}.2", "worker": f"{prefix}.1"},
                        engines={"worker": other_engine.host})
    secret = "hf_servesentinel4d1c"
    proc = run_cli(["serve", "up", ref, "--cluster", "engines", "--gpus", "none", "--model", str(model),
                    "-e", "N_GPU_LAYERS=2", "-e", "SPEC_TYPE=off"], repo, timeout=300, env={"HF_TOKEN": secret})
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        # a secret reaches the containers by name from this environment, and nothing written or said
        config = json.loads(docker("inspect", "enginebuild-serve-engines-head").stdout)[0]["Config"]["Env"]
        assert f"HF_TOKEN={secret}" in config
        folder = Path(os.environ["ENGINEBUILD_HOME"]) / "serve/engines"
        assert secret not in proc.stdout + proc.stderr
        assert all(secret not in f.read_text() for f in folder.glob("*.env"))
        assert "on every node" in proc.stderr and f"rpc-server at {prefix}.1:50052 answers" in proc.stdout, proc.stdout
        pulled = subprocess.run(["docker", "-H", other_engine.host, "image", "inspect", ref, "--format", "{{.Id}}"],
                                capture_output=True, text=True, check=True).stdout.strip()
        assert pulled == docker("image", "inspect", image, "--format", "{{.Id}}").stdout.strip()
        # each host's own interface for the same link: the container's eth0, the other machine's bridge (its name)
        assert "NCCL_SOCKET_IFNAME=eth0" in (folder / "head.env").read_text()
        assert f"NCCL_SOCKET_IFNAME={fabric['bridge']}\n" in (folder / "worker.env").read_text()
        holder, address = fabric["holders"]["head"]
        waited = docker("exec", holder, "/opt/enginebuild/bin/wait_for_server.sh", f"http://{address}:8012", "120",
                        check=False, timeout=180)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert complete(holder, address, PROMPTS[0], non_ascii_bytes(model))
        status = run_cli(["serve", "status", "--cluster", "engines"], repo, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"head ({prefix}.2): enginebuild-serve-engines-head running: " in status.stdout, status.stdout
        assert f"worker ({prefix}.1): enginebuild-serve-engines-worker running: " in status.stdout, status.stdout
    finally:
        stopped = run_cli(["serve", "stop", "--cluster", "engines"], repo, timeout=120)
        docker("rmi", pushed, check=False)  # the registry's name for the image: it would keep 320 MB in this engine
    assert stopped.returncode == 0 and "removed 2 container(s)" in stopped.stdout and "; 0 left" in stopped.stdout
    left = subprocess.run(["docker", "-H", other_engine.host, "ps", "-aq"], capture_output=True, text=True, check=True)
    assert serving_containers() == [] and left.stdout == ""
    status = run_cli(["serve", "status", "--cluster", "engines"], repo, timeout=60)
    assert status.returncode == 1 and status.stdout.count("no container of cluster engines") == 2, status.stdout
    # a local image, by name: copied to the node that lacks it when asked (docker save | docker load)
    lacks = run_cli(["serve", "check", image, "--gpus", "none", "--model", str(model)], repo, timeout=60)
    assert lacks.returncode == 1 and f"worker: no image {image} on its engine" in lacks.stderr, lacks.stderr
    copied = run_cli(["serve", "check", image, "--gpus", "none", "--model", str(model), "--transfer"], repo,
                     timeout=300)
    assert copied.returncode == 0, copied.stdout + copied.stderr
    assert "head: command: [\"llama-server\"" in copied.stdout and f"\"--rpc\", \"{prefix}.1:50052\"" in copied.stdout
    assert "worker: command: [\"ggml-rpc-server\", \"-H\", \"" + f"{prefix}.1" in copied.stdout, copied.stdout
    assert serving_containers() == []


def test_each_serving_fault_is_named_within_30_s_and_leaves_nothing_running(image, model, fabric, other_engine,
                                                                            tmp_path):
    prefix = fabric["prefix"]
    base = ["serve", "up", image, "--gpus", "none", "--model", str(model), "--timeout", "5"]

    def fails(repo, *extra: str) -> str:
        proc = run_cli([*base, *extra], repo, timeout=30)  # named within 30 s, or the run fails here
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert serving_containers() == [], proc.stderr
        return proc.stderr

    wrong = cluster_repo(tmp_path / "wrong", fabric, {"head": f"{prefix}.2", "worker": f"{prefix}.9"})
    said = fails(wrong)
    assert f"worker ({prefix}.9): no interface of this node has the address {prefix}.9 (it has: eth0 {prefix}.3" \
        in said, said

    repo = cluster_repo(tmp_path / "ok", fabric, {"head": f"{prefix}.2", "worker": f"{prefix}.3"})
    said = fails(repo, "--backend", "ray")
    assert "--backend ray is vLLM's" in said, said

    pid = docker("inspect", "-f", "{{.State.Pid}}", fabric["holders"]["head"][0]).stdout.strip()
    rule = ["INPUT", "-p", "tcp", "--dport", "29500", "-j", "DROP"]
    subprocess.run(["nsenter", "-t", pid, "-n", "iptables", "-A", *rule], check=True)
    try:
        said = fails(repo)
    finally:
        subprocess.run(["nsenter", "-t", pid, "-n", "iptables", "-D", *rule], check=True)
    assert f"worker ({prefix}.3): the head's master port {prefix}.2:29500 did not answer within 5 s: timed out" \
        in said, said

    # the worker's engine holds another image under the same name
    tar = subprocess.run(["tar", "-c", "-f", "-", "-C", str(tmp_path), "wrong"], check=True, capture_output=True)
    subprocess.run(["docker", "-H", other_engine.host, "import", "-", image], input=tar.stdout, check=True,
                   capture_output=True)
    other = cluster_repo(tmp_path / "other", fabric, {"head": f"{prefix}.2", "worker": f"{prefix}.3"},
                         engines={"worker": other_engine.host})
    said = fails(other)
    assert f"worker: {image} is image sha256:" in said and "the digest differs between nodes" in said, said
    other_engine.stop()  # the worker is down: its engine does not answer
    said = fails(other)
    assert f"worker: its Docker engine ({other_engine.host}) does not answer" in said, said


# the compile cache a warm-up leaves: llama.cpp compiles nothing ahead of time, but each node's program is
# Python, which (given a cache prefix, as torch's and vLLM's caches are given folders) writes the bytecode it
# compiles there: what the warm-up wrote is what is captured, pushed, restored and refused
PYCACHE = "/var/cache/enginebuild-pycache"


def test_a_warm_up_cache_is_pushed_beside_the_image_and_restored_only_where_its_record_matches(
        image, model, fabric, registry, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    keys = {}
    for name in ("ours", "other"):
        key = ec.generate_private_key(ec.SECP256R1())
        keys[name] = (tmp_path / f"{name}.pem", tmp_path / f"{name}.pub")
        keys[name][0].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))
        keys[name][1].write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                                serialization.PublicFormat.SubjectPublicKeyInfo))
    workspace = tmp_path / "repo"
    for part in ("images", "patches", "lockfiles"):
        shutil.copytree(ROOT / part, workspace / part)
    # the module's image, with its Python's cache prefix declared as a compile-cache folder: pushed, not loaded
    proc = run_cli(["image", "llamacpp-cpu", "--platform", NATIVE, "--no-load", "--push", "--to",
                    f"{registry.host}/enginebuild-test/warm",
                    "--set", "components[llama.cpp].build.args.CMAKE_BUILD_TYPE=None",
                    "--set", f"env.PYTHONPYCACHEPREFIX={PYCACHE}", "--set", f"compile-cache.pycache={PYCACHE}"],
                   workspace, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "component(s)" not in proc.stdout  # the module's llama.cpp, reused: only the config differs
    ref = next(line for line in proc.stdout.splitlines() if "@sha256:" in line).strip()
    digest = ref.split("@")[1]
    cluster = f"warm{uuid.uuid4().hex[:6]}"
    volume = f"enginebuild-cache-{cluster}-pycache"
    repo = cluster_repo(tmp_path / "one", fabric, {"head": f"{fabric['prefix']}.2"})
    settings = ["--cluster", cluster, "--gpus", "none", "--model", str(model), "-e", "N_GPU_LAYERS=2",
                "-e", "SPEC_TYPE=off"]

    def up(*extra: str) -> str:
        started = run_cli(["serve", "up", ref, *settings, *extra], repo, timeout=300)
        stopped = run_cli(["serve", "stop", "--cluster", cluster], repo, timeout=120)
        assert started.returncode == 0, started.stdout + started.stderr
        assert stopped.returncode == 0 and "; 0 left" in stopped.stdout, stopped.stdout + stopped.stderr
        return started.stderr

    def cached() -> list[str]:
        return docker("run", "--rm", "--entrypoint", "/bin/find", "-v", f"{volume}:/c", image, "/c", "-name", "*.pyc"
                      ).stdout.split()

    try:
        warmed = run_cli(["serve", "warm", ref, *settings, "-e", "CTX_SIZE=512", "--sign", "--key",
                          str(keys["ours"][0])], repo, timeout=600)
        assert warmed.returncode == 0, warmed.stdout + warmed.stderr
        assert serving_containers() == []  # stopped before its caches were read
        (line,) = warmed.stdout.split("\n")[:1]
        artifact, sent = line.split()
        assert artifact.startswith("sha256:") and int(sent) > 0
        files = int(warmed.stderr.split(f"compile cache {artifact[:19]}: ")[1].split(" files")[0])
        compiled = cached()
        # what the node's program compiled at its start (its imports: json, socket, subprocess...), all of it
        assert files == len(compiled) > 20 and any(p.endswith("/json/__init__.cpython-311.pyc") for p in compiled)
        # beside the image: its referrers (the registry's API, else the referrers tag) list it
        from enginebuild.oci.reference import parse_image_ref
        from enginebuild.oci.referrers import listed
        from enginebuild.oci.registry import RegistryClient

        assert artifact in {m["digest"] for m in listed(RegistryClient(), parse_image_ref(ref), digest)}
        # a second warm-up that compiles the same files pushes nothing
        again = run_cli(["serve", "warm", ref, *settings, "-e", "CTX_SIZE=512", "--sign", "--key",
                         str(keys["ours"][0])], repo, timeout=600)
        assert again.returncode == 0 and again.stdout.split("\n")[0] == f"{artifact} 0", again.stdout + again.stderr

        # restored where the record matches (signed by the key given): the volume starts empty, then holds it all
        said = up("-e", "CTX_SIZE=512", "--key", str(keys["ours"][1]))
        assert f"head: compile cache {artifact[:19]} restored ({files} files into {PYCACHE})" in said, said
        assert sorted(cached()) == sorted(compiled)

        # another engine argument: refused naming the field, and nothing of it restored
        said = up("-e", "CTX_SIZE=1024")
        assert f"compile cache {artifact[:19]}: engine_args: the cache's" in said and "CTX_SIZE=512" in said, said
        assert "head: no compile cache of this image was made under this node's record" in said, said
        # a key that did not sign it: refused, the node compiles at its start
        said = up("-e", "CTX_SIZE=512", "--key", str(keys["other"][1]))
        assert f"compile cache {artifact[:19]}: " in said and "not restored" in said and "restored (" not in said, said
    finally:
        run_cli(["serve", "stop", "--cluster", cluster], repo, timeout=120)
        docker("volume", "rm", "-f", volume, check=False)
        docker("rmi", ref, check=False)  # pulled by `serve` from the registry
    assert serving_containers() == []


def rpc_listeners(port: int) -> list[str]:
    """The addresses TCP sockets listen on at `port` in this network namespace (/proc/net/tcp{,6})."""
    import ipaddress

    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            address, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:
                raw = bytes.fromhex(address)
                packed = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.append(str(ipaddress.ip_address(packed)))
    return sorted(found)


def test_a_locked_deployment_moves_only_the_weights_a_node_lacks_and_is_ready_only_with_its_answers(
        image, model, fabric, registry, tmp_path):
    from helpers.engines import start_engine

    prefix = fabric["prefix"]
    pushed = f"{registry.host}/enginebuild-test/deploy-llama:1"
    docker("tag", image, pushed)
    ref = f"{registry.host}/enginebuild-test/deploy-llama@{docker('push', pushed).stdout.split('digest: ')[1].split()[0]}"
    # the model at one path on both nodes: the head's copy is the model, the worker's machine (an engine
    # in a mount namespace of its own) sees another folder there, empty at first
    here, far_copy = tmp_path / "models" / "tiny", tmp_path / "far" / "tiny"
    shutil.copytree(model, here)
    far_copy.mkdir(parents=True)
    far = start_engine(tmp_path / "far-engine", index=8, binds=((far_copy, here),))
    repo = cluster_repo(tmp_path / "deploy", fabric, {"head": f"{prefix}.2", "worker": f"{prefix}.1"},
                        engines={"worker": far.host})
    lock = tmp_path / "deploy.lock.json"
    # (EOS ignored: the tiny model may end a reply at its first token, which leaves bench.sh no speed to measure)
    settings = ["--cluster", "deploy", "--gpus", "none", "-e", "N_GPU_LAYERS=2", "-e", "SPEC_TYPE=off",
                "-e", "EXTRA_ARGS=--ignore-eos"]
    sizes = {p.name: p.stat().st_size for p in here.iterdir()}

    def serve(*argv: str) -> subprocess.CompletedProcess:
        return run_cli(["serve", *argv], repo, timeout=600)

    def stop() -> None:
        stopped = serve("stop", "--cluster", "deploy")
        assert stopped.returncode == 0 and "; 0 left" in stopped.stdout, stopped.stdout + stopped.stderr

    try:
        started = serve("up", ref, "--model", str(here), *settings)
        assert started.returncode == 0 and ", ready (it answers)" in started.stdout, started.stdout + started.stderr
        # the lock: the image by digest, the model hashed on the head, the running cluster's greedy answers
        locked = serve("lock", ref, "--model", str(here), *settings, "--out", str(lock), "--max-tokens", "3",
                       *[arg for prompt in PROMPTS for arg in ("--prompt", prompt)])
        stop()
        assert locked.returncode == 0, locked.stdout + locked.stderr
        doc = json.loads(lock.read_text())
        assert doc["image"] == ref and [n["role"] for n in doc["nodes"]] == ["head", "worker"]
        assert doc["model"]["files"] == {p.name: {"size": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes())
                                                  .hexdigest()} for p in here.iterdir()}
        assert doc["env"] == {"N_GPU_LAYERS": "2", "SPEC_TYPE": "off", "EXTRA_ARGS": "--ignore-eos"}
        assert len(doc["answers"]) == len(PROMPTS) == 20
        assert len({a["expected"] for a in doc["answers"]}) > 1  # greedy answers of the prompts, not one text

        # the worker's copy is not the lock's: refused, naming the files, and nothing started
        refused = serve("up", "--locked", str(lock), "--cluster", "deploy", "--gpus", "none")
        assert refused.returncode == 1 and serving_containers() == [], refused.stderr
        assert "worker: model book.txt: missing (--move-weights copies" in refused.stderr, refused.stderr
        assert "worker: model tiny.gguf: missing\n" in refused.stderr and "head: model" not in refused.stderr
        # moved once: the worker receives every file, the head nothing, then both are checked and it answers
        moved = serve("up", "--locked", str(lock), "--cluster", "deploy", "--gpus", "none", "--move-weights")
        assert moved.returncode == 0, moved.stdout + moved.stderr
        assert f"worker: model: {len(sizes)} file(s) as the lock has them; {len(sizes)} received " \
               f"({sum(sizes.values())} bytes)" in moved.stderr, moved.stderr
        assert f"head: model: {len(sizes)} file(s) as the lock has them; 0 bytes moved" in moved.stderr
        assert "answers: 20 of 20 as the lock has them" in moved.stderr and ", ready (it answers; 20 answer(s)" \
            in moved.stdout, moved.stdout + moved.stderr
        # the worker's rpc-server listens on the link's address only (the node's sockets: its host's network)
        assert rpc_listeners(50052) == [f"{prefix}.1"], rpc_listeners(50052)
        # the deployment record: the image's bench.sh run in the head's container, its speeds beside the lock
        measured = serve("bench", "--locked", str(lock), "--cluster", "deploy", "-e", "BENCH_PP=64", "-e", "BENCH_TG=8",
                         "-e", "BENCH_RUNS=1", "-e", "BENCH_BOOK=/models/tiny/book.txt")
        assert measured.returncode == 0, measured.stdout + measured.stderr
        record = json.loads((tmp_path / "deploy.lock.bench.json").read_text())
        assert record["image"] == ref and record["env"] == doc["env"] and record["bench"]["BENCH_PP"] == "64"
        (run,) = record["runs"]
        assert (run["prompt_size"], run["response_size"]) == (64, 8) and run["pp_tokens_s"] > 0 < run["tg_tokens_s"]
        assert {p.name: p.read_bytes() for p in far_copy.iterdir()} == {p.name: p.read_bytes() for p in here.iterdir()}
        stop()
        # a second start moves nothing; a file damaged on one node is named and only it is sent again
        again = serve("up", "--locked", str(lock), "--cluster", "deploy", "--gpus", "none", "--move-weights")
        stop()
        assert again.returncode == 0 and again.stderr.count("; 0 bytes moved") == 2, again.stderr
        damaged = far_copy / "tiny.gguf"
        data = bytearray(damaged.read_bytes())
        data[len(data) // 2] ^= 0xFF
        damaged.write_bytes(bytes(data))
        mended = serve("up", "--locked", str(lock), "--cluster", "deploy", "--gpus", "none", "--move-weights")
        stop()
        assert mended.returncode == 0, mended.stderr
        assert "worker: model tiny.gguf: sha256 " in mended.stderr and "received from a node that holds" in mended.stderr
        assert f"worker: model: {len(sizes)} file(s) as the lock has them; 1 received ({sizes['tiny.gguf']} bytes)" \
            in mended.stderr, mended.stderr
        assert damaged.read_bytes() == (here / "tiny.gguf").read_bytes()

        # another answer than the lock's: named, and the cluster stopped (kept only when asked)
        doc["answers"][0]["expected"] += " (not what it says)"
        lock.write_text(json.dumps(doc, indent=2))
        wrong = serve("up", "--locked", str(lock), "--cluster", "deploy", "--gpus", "none")
        assert wrong.returncode == 1 and serving_containers() == [], wrong.stderr
        assert f"answer 1 differs: prompt {PROMPTS[0]!r}: expected " in wrong.stderr and "(not what it says)" \
            in wrong.stderr and "answer 2" not in wrong.stderr, wrong.stderr
        kept = serve("up", "--locked", str(lock), "--cluster", "deploy", "--gpus", "none", "--keep-failed")
        assert kept.returncode == 1 and "is left running (--keep-failed)" in kept.stderr, kept.stderr
        assert serving_containers() == ["enginebuild-serve-deploy-head"]  # the worker's is on its own engine
        stop()
        # a start with other settings than the lock's: refused before anything runs
        other = serve("up", "--locked", str(lock), "--cluster", "deploy", "--gpus", "none", "-e", "CTX_SIZE=1024",
                      "-e", "N_GPU_LAYERS=2", "-e", "SPEC_TYPE=off")
        assert other.returncode == 2 and "env: the lock has no CTX_SIZE, this start CTX_SIZE=1024" in other.stderr

        # an engine that cannot load its model: the start says so, with the engine's last lines, and stops
        broken = tmp_path / "broken"
        broken.mkdir()
        (broken / "tiny.gguf").write_bytes(b"GGUF" + bytes(64))
        failed = serve("up", ref, "--model", str(broken), *settings, "--ready-timeout", "120")
        assert failed.returncode == 1 and serving_containers() == [], failed.stdout + failed.stderr
        assert "its container ended" in failed.stderr, failed.stderr
    finally:
        serve("stop", "--cluster", "deploy")
        far.stop()
        docker("rmi", pushed, check=False)
    assert serving_containers() == []
