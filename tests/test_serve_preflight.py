"""What `serve` checks on each node before anything runs there, against a real engine: a `--model`
path the node lacks is named (and never made, as an empty folder, on the node's host), GPUs are
given where the node's engine has the NVIDIA runtime and `--gpus all` is refused naming the node
that lacks it (not Docker's raw error), `serve logs` names a node with no container, and `doctor`
checks each node of enginebuild.yaml."""
from __future__ import annotations

import json
import os
import uuid

import pytest

from helpers.docker import docker
from helpers.inprocess import run_in_process
from helpers.specs import write_image

pytestmark = [pytest.mark.docker]

SPEC = """base: scratch
platform: linux/amd64
entrypoint: [/opt/app/run.sh]
files:
  /opt/app/run.sh: run.sh
"""


@pytest.fixture(scope="module")
def image(docker_engine, tmp_path_factory):
    """An image with a launcher and nothing else (no python3: the preflight's checks here come first)."""
    ws = tmp_path_factory.mktemp("serve") / "repo"
    (ws / "lockfiles").mkdir(parents=True)
    write_image(ws, "t", SPEC, {"run.sh": "#!/bin/sh\necho serving\n"})
    assert run_in_process(["lock", "t"], ws).returncode == 0
    tag = f"enginebuild-test/serve-preflight:{uuid.uuid4().hex[:8]}"
    proc = run_in_process(["image", "t", "-t", tag], ws)
    assert proc.returncode == 0, proc.stderr
    yield ws, tag
    docker("rmi", "-f", tag, "enginebuild/t:latest", check=False)


def serving_containers() -> list[str]:
    return docker("ps", "-aq", "--filter", "label=org.enginebuild.serve").stdout.split()


def test_a_model_path_a_node_lacks_is_named_before_anything_runs_and_never_made(image, tmp_path):
    ws, tag = image
    missing = tmp_path / "models" / "qwen-typo"
    proc = run_in_process(["serve", "check", tag, "--node", "head=127.0.0.1", "--model", str(missing),
                           "--gpus", "none"], ws)
    assert proc.returncode == 1, proc.stderr
    assert f"head: --model {missing}: no such file or folder on this node" in proc.stderr, proc.stderr
    assert not missing.exists() and not missing.parent.exists()  # no empty folder made on the host
    assert serving_containers() == []


def test_gpus_all_where_a_node_has_no_nvidia_runtime_is_refused_naming_it_and_auto_gives_none(image):
    ws, tag = image
    info = json.loads(docker("info", "--format", "{{json .Runtimes}}").stdout)
    assert "nvidia" not in info  # this engine has no NVIDIA runtime
    refused = run_in_process(["serve", "check", tag, "--node", "head=127.0.0.1", "--gpus", "all"], ws)
    assert refused.returncode == 1
    assert "head: its Docker engine has no NVIDIA runtime (docker info: Runtimes): --gpus all cannot be given" \
        in refused.stderr, refused.stderr
    assert "could not select device driver" not in refused.stderr  # not Docker's own words
    auto = run_in_process(["serve", "check", tag, "--node", "head=127.0.0.1"], ws)
    assert "GPUs: none (no node has the NVIDIA runtime) (--gpus auto)" in auto.stderr, auto.stderr
    assert "could not select device driver" not in auto.stderr and "NVIDIA runtime, as other" not in auto.stderr
    assert serving_containers() == []


def test_serve_logs_names_a_node_with_no_container_of_the_cluster(image):
    ws, _ = image
    proc = run_in_process(["serve", "logs", "--node", "head=127.0.0.1", "--cluster", "absent"], ws)
    assert proc.returncode == 1 and "== head (127.0.0.1): no container of cluster absent" in proc.stdout, proc.stdout
    bad = run_in_process(["serve", "logs", "--node", "head=127.0.0.1", "--tail", "0"], ws)
    assert bad.returncode == 2 and "--tail 0: between 1 and 100000 lines" in bad.stderr


def test_doctor_checks_each_node_of_the_settings(image, tmp_path):
    ws, _ = image
    (ws / "enginebuild.yaml").write_text(
        "nodes:\n"
        f"  - {{name: here, address: 127.0.0.1, host: \"{os.environ['DOCKER_HOST']}\"}}\n"
        f"  - {{name: gone, address: 127.0.0.2, host: \"unix://{tmp_path}/no-engine.sock\"}}\n")
    try:
        doc = json.loads(run_in_process(["doctor", "--json"], ws).stdout)
    finally:
        (ws / "enginebuild.yaml").unlink()
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["node here"]["status"] == "warn" and "no NVIDIA runtime" in checks["node here"]["detail"]
    assert checks["node gone"]["status"] == "FAIL" and "does not answer" in checks["node gone"]["detail"]
