"""The registry-backed cache (component outputs and command layers, by key), fresh engines,
no-op speed, minimal pushes, and the same bytes from two clones."""
import json
import os
import re
import shutil
import uuid

import pytest

from conftest import need
from helpers.docker import docker
from helpers.engines import start_engine
from helpers.inprocess import run_in_process

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


def variant() -> list:
    """A build argument that gives the demo's components keys no earlier run has made (on this
    machine's platform: what the cache does is the same for every platform)."""
    return ["--build-arg", f"CFLAGS=-O2 -DENGINEBUILD_TEST_RUN={uuid.uuid4().hex[:12]}", "--platform", "linux/amd64"]


def edit_launcher(workspace):
    with open(workspace / "images/demo/launch_server.sh", "a") as handle:
        handle.write(f"# edit {uuid.uuid4().hex}\n")


def test_a_fresh_runner_with_the_cache_pulls_the_components_and_runs_no_builder(workspace, registry, fresh_engine,
                                                                               tmp_path):
    cache = f"{registry.host}/enginebuild-test/cache-{uuid.uuid4().hex[:8]}"
    args = variant()
    proc = run_in_process(["image", "demo", "--cache", cache, *args], workspace)
    assert proc.returncode == 0, proc.stderr
    assert "component engine: outputs pushed to" in proc.stderr
    edit_launcher(workspace)
    env = {**fresh_engine.env, "ENGINEBUILD_HOME": str(tmp_path / "home2")}
    plan = json.loads(run_in_process(["plan", "demo", "--json", "--cache", cache, *args], workspace,
                              env=env).stdout)["images"][0]
    assert plan["components_to_build"] == [] and plan["layers_to_build"] == []
    assert {"kernels", "engine", "system commands"} <= set(plan["from_cache"])
    proc = run_in_process(["image", "demo", "--cache", cache, *args], workspace, env={**env, "ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 0, proc.stderr  # no builder could run: none was needed
    assert "pulled" in proc.stdout and "built" not in proc.stdout
    out = docker("-H", fresh_engine.host, "run", "--rm", "--entrypoint", "demo-engine", "enginebuild/demo:latest",
                 "--bad-option", "x", check=False)
    assert "unknown option --bad-option" in out.stderr  # the engine binary came from the cache and runs


def test_a_cache_entry_that_names_another_key_is_refused_and_built(workspace, registry, fresh_engine, tmp_path):
    cache = f"{registry.host}/enginebuild-test/poisoned-{uuid.uuid4().hex[:8]}"
    args = variant()
    plan = json.loads(run_in_process(["plan", "demo", "--json", *args], workspace).stdout)["images"][0]
    key = next(c["key"] for c in plan["components"] if c["name"] == "kernels")
    # a real cache entry of another key, copied under this key's tag
    other = f"{registry.host}/enginebuild-test/source-{uuid.uuid4().hex[:8]}"
    assert run_in_process(["image", "demo", "--cache", other, *variant()], workspace).returncode == 0
    import requests

    tags = requests.get(f"http://{registry.host}/v2/{other.split('/', 1)[1]}/tags/list").json()["tags"]
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    body = requests.get(f"http://{registry.host}/v2/{other.split('/', 1)[1]}/manifests/{tags[0]}", headers=accept)
    for blob in body.json()["layers"] + [body.json()["config"]]:
        data = requests.get(f"http://{registry.host}/v2/{other.split('/', 1)[1]}/blobs/{blob['digest']}").content
        start = requests.post(f"http://{registry.host}/v2/{cache.split('/', 1)[1]}/blobs/uploads/")
        location = start.headers["Location"]
        location = location if location.startswith("http") else f"http://{registry.host}{location}"
        requests.put(f"{location}&digest={blob['digest']}", data=data).raise_for_status()
    requests.put(f"http://{registry.host}/v2/{cache.split('/', 1)[1]}/manifests/{key}", data=body.content,
                 headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"}).raise_for_status()
    env = {**fresh_engine.env, "ENGINEBUILD_HOME": str(tmp_path / "home3")}
    proc = run_in_process(["image", "demo", "--cache", cache, "--cache-readonly", *args], workspace, env=env)
    assert proc.returncode == 0, proc.stderr
    # the signature covers the tag: an entry copied under another key's tag does not hold
    assert re.search(r"entries whose signature by ed25519:[0-9a-f]{16} does not hold are not used", proc.stderr), \
        proc.stderr
    built = proc.stdout.split("built 4 component(s) (", 1)[1].split(")", 1)[0]
    assert sorted(built.split(", ")) == ["cuda-kernels", "engine", "engine-py", "kernels"], proc.stdout


def test_a_no_op_contacts_neither_builder_nor_registry(workspace):
    assert run_in_process(["image", "demo"], workspace).returncode == 0
    proc = run_in_process(["image", "demo", "--cache", "127.0.0.1:9/nowhere/cache"], workspace,
                   env={"ENGINEBUILD_DOCKER": "/bin/false", "ENGINEBUILD_HTTP_BACKOFF": "5"})
    assert proc.returncode == 0, proc.stderr
    assert "nothing to build" in proc.stdout


def test_after_a_script_edit_push_uploads_one_layer_and_little_more_than_the_edit(workspace, registry):
    repo = f"{registry.host}/enginebuild-test/minimal-{uuid.uuid4().hex[:8]}"
    assert run_in_process(["image", "demo"], workspace).returncode == 0
    assert run_in_process(["push", "demo", "--to", repo, "--tag", "before", "--no-attach"], workspace).returncode == 0
    edit_launcher(workspace)
    assert run_in_process(["image", "demo"], workspace).returncode == 0
    proc = run_in_process(["push", "demo", "--to", repo, "--tag", "after", "--no-attach"], workspace)
    assert proc.returncode == 0, proc.stderr
    record = next(r for r in json.loads((workspace / "lockfiles/demo.pushes.json").read_text())["pushes"]
                  if r["tag"] == "after")
    assert record["layers_pushed"] == 1  # the edited layer: the same bytes in both platforms' images
    edited = (workspace / "images/demo/launch_server.sh").stat().st_size
    assert record["bytes_pushed"] < 2 * edited + 2 * 16_384  # the layer, and per platform a config and manifest


def test_the_same_files_give_the_same_image_from_two_clones(workspace, tmp_path):
    marker = uuid.uuid4().hex
    ids = []
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
        proc = run_in_process(["image", "demo"], clone)
        assert proc.returncode == 0, proc.stderr
        ids.append(docker("image", "inspect", "enginebuild/demo:latest", "--format", "{{.Id}}").stdout.strip())
    assert ids[0] == ids[1]
