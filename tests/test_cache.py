"""The registry-backed stage cache, fresh engines, no-op speed paths, minimal pushes, reproducible stages."""
import json
import os
import shutil
import subprocess
import uuid

import pytest
from conftest import need, run_cli
from helpers.docker import docker, layers
from helpers.engines import start_engine

pytestmark = [pytest.mark.docker, pytest.mark.registry, pytest.mark.network]


@pytest.fixture(scope="module")
def fresh_engine(docker_engine, tmp_path_factory):
    need(os.geteuid() == 0 and shutil.which("dockerd") is not None and shutil.which("ip") is not None,
         "a second Docker engine needs root, dockerd and ip")
    engine = start_engine(tmp_path_factory.mktemp("engine2"))
    yield engine
    engine.stop()
    # the first engine must still run containers afterwards
    assert docker("run", "--rm", "--entrypoint", "true", "enginebuild/demo:latest", check=False).returncode == 0


def variant(workspace) -> list:
    """Build arguments that give the demo's engine-build stage a key no earlier run has made."""
    return ["--build-arg", f"CFLAGS=-O2 -DENGINEBUILD_TEST_RUN={uuid.uuid4().hex[:12]}"]


def edit_launcher(workspace):
    with open(workspace / "images/demo/launch_server.sh", "a") as handle:
        handle.write(f"# edit {uuid.uuid4().hex}\n")


def test_a_fresh_engine_with_the_registry_cache_builds_only_the_scripts_stage(workspace, registry, fresh_engine, tmp_path):
    cache = f"{registry.host}/enginebuild-test/cache-{uuid.uuid4().hex[:8]}"
    args = variant(workspace)
    proc = run_cli(["image", "demo", "--cache", cache, *args], workspace)
    assert proc.returncode == 0, proc.stderr
    assert "engine-build" in proc.stdout and "pushed to" in proc.stderr
    edit_launcher(workspace)
    env = {**fresh_engine.env, "ENGINEBUILD_HOME": str(tmp_path / "home2")}
    plan = json.loads(run_cli(["plan", "demo", "--json", "--cache", cache, *args], workspace, env=env).stdout)
    assert plan["from_cache"] == ["engine-build"] and plan["to_build"] == ["files"]
    proc = run_cli(["image", "demo", "--cache", cache, *args], workspace, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "built 1 of 5 stages (files), pulled engine-build from the cache" in proc.stdout
    built = subprocess.run(["docker", "-H", fresh_engine.host, "image", "inspect", "enginebuild/demo:latest"],
                           capture_output=True, text=True, check=True)
    assert json.loads(built.stdout)[0]["Config"]["Labels"]["org.enginebuild.key"] == plan["final_key"]


def test_a_cache_entry_that_is_not_its_stage_is_refused_and_built(workspace, registry, fresh_engine, tmp_path):
    cache = f"{registry.host}/enginebuild-test/poisoned-{uuid.uuid4().hex[:8]}"
    args = variant(workspace)
    plan = json.loads(run_cli(["plan", "demo", "--json", *args], workspace).stdout)
    final_key = plan["final_key"]
    # put another image under the final stage's key
    docker("tag", "enginebuild/demo:latest", f"{cache}:{final_key}")
    docker("push", f"{cache}:{final_key}")
    env = {**fresh_engine.env, "ENGINEBUILD_HOME": str(tmp_path / "home2")}
    proc = run_cli(["image", "demo", "--cache", cache, "--cache-readonly", *args], workspace, env=env, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    assert "is not the stage it is named after" in proc.stderr
    assert "built 5 of 5 stages" in proc.stdout


def test_a_no_op_contacts_neither_builder_nor_registry(workspace):
    assert run_cli(["image", "demo"], workspace).returncode == 0
    # an unreachable cache and no usable builder: a no-op must need neither
    proc = run_cli(["image", "demo", "--cache", "127.0.0.1:9/nowhere/cache"], workspace,
                   env={"ENGINEBUILD_DOCKER": "/bin/false", "ENGINEBUILD_HTTP_BACKOFF": "5"})
    assert proc.returncode == 0, proc.stderr
    assert "nothing to build" in proc.stdout


def test_after_a_script_edit_push_uploads_one_layer_and_little_more_than_the_edit(workspace, registry):
    repo = f"{registry.host}/enginebuild-test/minimal-{uuid.uuid4().hex[:8]}"
    assert run_cli(["image", "demo"], workspace).returncode == 0
    assert run_cli(["push", "demo", "--to", repo, "--tag", "before"], workspace).returncode == 0
    edit_launcher(workspace)
    assert run_cli(["image", "demo"], workspace).returncode == 0
    proc = run_cli(["push", "demo", "--to", repo, "--tag", "after"], workspace)
    assert proc.returncode == 0, proc.stderr
    record = next(r for r in json.loads((workspace / "lockfiles/demo.pushes.json").read_text())["pushes"]
                  if r["tag"] == "after")
    assert record["layers_pushed"] == 1
    edited = (workspace / "images/demo/launch_server.sh").stat().st_size
    assert record["bytes_pushed"] < 2 * edited + 16_384  # the layer, plus config and manifest


def test_the_scripts_stage_is_byte_for_byte_the_same_from_two_clones(workspace, tmp_path):
    marker = uuid.uuid4().hex
    digests = []
    for n, umask in enumerate((0o022, 0o002)):
        clone = tmp_path / f"clone{n}"
        old = os.umask(umask)
        try:
            shutil.copytree(workspace, clone)  # new files: new mtimes and this umask's modes
            with open(clone / "images/demo/launch_server.sh", "a") as handle:
                handle.write(f"# {marker}\n")
            os.utime(clone / "images/demo/launch_server.sh", (1_000_000 * (n + 1), 1_000_000 * (n + 1)))
            os.chmod(clone / "images/demo/wait_for_server.sh", 0o755 if n == 0 else 0o775)
        finally:
            os.umask(old)
        plan = json.loads(run_cli(["plan", "demo", "--json"], clone).stdout)
        docker("rmi", "-f", f"enginebuild/stage:{plan['final_key']}", check=False)
        proc = run_cli(["image", "demo"], clone)
        assert proc.returncode == 0, proc.stderr
        digests.append((plan["final_key"], layers("enginebuild/demo:latest")))
    assert digests[0] == digests[1]
