"""Building the demo for real: BuildKit on the real engine, a real registry for pushes."""
import json
import re
import shutil
import subprocess
import uuid

import pytest
import requests
from conftest import need, run_cli
from helpers.docker import docker, inspect, layers

pytestmark = [pytest.mark.docker, pytest.mark.network]


@pytest.fixture(scope="module")
def built_demo(docker_engine, debian_reachable, tmp_path_factory):
    """The demo as committed, built once for this module (later runs find its stages)."""
    from conftest import ROOT

    proc = run_cli(["image", "demo"], ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc


def append_to_launcher(workspace) -> str:
    marker = uuid.uuid4().hex
    with open(workspace / "images/demo/launch_server.sh", "a") as handle:
        handle.write(f"# tuning note {marker}\n")
    return marker


def test_the_demo_builds_and_an_immediate_second_run_calls_no_builder(built_demo, workspace):
    assert "demo:" in built_demo.stdout
    # a builder that cannot run proves none is started
    proc = run_cli(["image", "demo"], workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"demo: all 5 stages exist; nothing to build \(\d+ ms\)", proc.stdout)
    plan = json.loads(run_cli(["plan", "demo", "--json"], workspace).stdout)
    assert [s["action"] for s in plan["stages"]] == ["exists"] * 5


def test_a_script_edit_rebuilds_only_the_scripts_stage(built_demo, workspace):
    before = layers("enginebuild/demo:latest")
    append_to_launcher(workspace)
    plan = json.loads(run_cli(["plan", "demo", "--json"], workspace).stdout)
    assert plan["to_build"] == ["files"]
    files = plan["stages"][-1]
    assert files["changed"] == ["file images/demo/launch_server.sh"]
    proc = run_cli(["image", "demo"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert "built 1 of 5 stages (files)" in proc.stdout
    after = layers("enginebuild/demo:latest")
    # the files stage is one layer per file: the manifest, launch_server.sh, wait_for_server.sh
    assert len(after) == len(before)
    assert after[:-3] == before[:-3]
    assert [a == b for a, b in zip(after[-3:], before[-3:])] == [True, False, True]


def test_the_image_runs_the_patched_engine_with_its_launcher(built_demo):
    name = f"eb-demo-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, "-e", "SERVED_MODEL_NAME=tiny", "enginebuild/demo:latest")
    try:
        waited = docker("exec", name, "/opt/enginebuild/bin/wait_for_server.sh", "http://127.0.0.1:8000", "30")
        assert "is up" in waited.stdout
        models = docker("exec", name, "wget", "-q", "-O", "-", "http://127.0.0.1:8000/v1/models").stdout
        assert json.loads(models)["data"][0]["id"] == "tiny"
        logs = docker("logs", name).stdout
        assert "aux_hidden_state_layers=(2, 17, 32, 47, 62)" in logs  # the patch was applied before the compile
        assert "launch_server.sh: demo-engine --model /models/demo-model --served-model-name tiny --port 8000" in logs
    finally:
        docker("rm", "-f", name, check=False)


def test_a_missing_model_path_stops_the_launcher_with_a_clear_message(built_demo):
    proc = docker("run", "--rm", "-e", "MODEL_PATH=", "enginebuild/demo:latest", check=False)
    assert proc.returncode == 2
    assert "MODEL_PATH is not set" in proc.stderr


def test_the_image_carries_oci_labels_pins_and_a_manifest(built_demo):
    from conftest import ROOT

    labels = inspect("enginebuild/demo:latest")["Config"]["Labels"]
    lock = json.loads((ROOT / "lockfiles/demo.lock").read_text())
    assert labels["org.opencontainers.image.created"] == lock["created"]
    assert labels["org.opencontainers.image.title"] == "demo"
    assert labels["org.enginebuild.patches"].startswith("demo-engine/0001-aux-layer-ids-off-by-one.patch@sha256:")
    manifest = json.loads(docker("run", "--rm", "--entrypoint", "cat", "enginebuild/demo:latest",
                                 "/opt/enginebuild/manifest.json").stdout)
    assert manifest["inputs"] == {k: v["resolved"] for k, v in lock["inputs"].items()}


def test_push_prints_and_records_the_digest_the_registry_serves(built_demo, registry, workspace):
    repo = f"{registry.host}/enginebuild/demo"
    proc = run_cli(["push", "demo", "--to", repo, "--tag", "ci"], workspace)
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.strip().splitlines()[0]
    head = requests.head(f"http://{registry.host}/v2/enginebuild/demo/manifests/ci",
                         headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    assert printed == f"{repo}@{head.headers['Docker-Content-Digest']}"
    records = json.loads((workspace / "lockfiles/demo.pushes.json").read_text())["pushes"]
    assert [(r["repository"], r["tag"], r["digest"]) for r in records] == \
        [(repo, "ci", head.headers["Docker-Content-Digest"])]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", records[0]["pushed_at"])


def test_a_push_that_fails_records_nothing(built_demo, workspace):
    proc = run_cli(["push", "demo", "--to", "127.0.0.1:9/enginebuild/demo"], workspace)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: push of 127.0.0.1:9/enginebuild/demo")
    assert not (workspace / "lockfiles/demo.pushes.json").exists()


def test_a_patch_that_no_longer_applies_stops_the_build_before_any_stage_naming_patch_file_and_hunk(built_demo, workspace):
    source = workspace / "images/demo/engine/engine.c"
    source.write_text(source.read_text().replace("return drafter_layer_id;", f"return drafter_layer_id; /* {uuid.uuid4().hex} */"))
    proc = run_cli(["image", "demo"], workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: stage patches: patch demo-engine/0001-aux-layer-ids-off-by-one.patch "
                                  "does not apply to demo-engine folder images/demo/engine (conflicts): "
                                  "engine.c: hunk 1 @@ -20,7 +20,7 @@: the source differs from the hunk's context")
    assert "building" not in proc.stderr


def test_the_legacy_builder_is_never_used(workspace, docker_engine):
    legacy = [path for path in ("/usr/local/bin/docker", "/usr/bin/docker") if shutil.which(path)
              and subprocess.run([path, "buildx", "version"], capture_output=True).returncode != 0
              and int(re.search(r"version (\d+)", subprocess.run([path, "--version"], capture_output=True,
                                                                  text=True).stdout).group(1)) >= 23]
    need(bool(legacy), "no docker client of 23.0 or later without buildx on this machine")
    append_to_launcher(workspace)
    proc = run_cli(["image", "demo"], workspace, env={"ENGINEBUILD_DOCKER": legacy[0]})
    assert proc.returncode == 2
    assert "no BuildKit-capable docker client" in proc.stderr
    assert "never uses the legacy builder" in proc.stderr
