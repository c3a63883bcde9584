"""One image, several platforms: the demo builds for linux/amd64 and linux/arm64 (arm64 under
emulation here), each with its own keys and platform-qualified local tags; the arm64 image
runs; `push` uploads both and an OCI index, prints REPO@sha256:<index>, records the index
and each platform's digest; a registry that refuses the index gets a clear error."""
import json
import uuid

import pytest
import requests

from conftest import ROOT, run_cli
from helpers import report
from helpers.docker import docker, inspect
from helpers.faultproxy import FaultProxy

pytestmark = [pytest.mark.docker, pytest.mark.registry, pytest.mark.network]
INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@pytest.fixture(scope="module")
def built_demo(docker_engine, debian_reachable, pypi_reachable):
    proc = run_cli(["image", "demo"], ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_each_platform_has_its_own_keys_and_tags_and_the_plain_tag_stays_native(built_demo, workspace):
    amd64, arm64 = inspect("enginebuild/demo:latest-amd64"), inspect("enginebuild/demo:latest-arm64")
    assert (amd64["Architecture"], arm64["Architecture"]) == ("amd64", "arm64")
    assert amd64["Id"] != arm64["Id"]
    assert inspect("enginebuild/demo:latest")["Id"] == amd64["Id"]  # this machine's platform
    run_cli(["image", "demo", "--platform", "linux/arm64"], workspace)  # building one platform alone
    assert inspect("enginebuild/demo:latest")["Id"] == amd64["Id"]  # does not take the plain tag
    plans = {}
    for platform in ("linux/amd64", "linux/arm64"):
        doc = json.loads(run_cli(["plan", "demo", "--json", "--platform", platform], workspace).stdout)["images"][0]
        plans[platform] = {c["name"]: c["key"] for c in doc["components"]}
    assert all(plans["linux/amd64"][n] != plans["linux/arm64"][n] for n in plans["linux/amd64"])


def test_the_arm64_image_runs_the_demo_engine_under_emulation(built_demo):
    out = docker("run", "--rm", "--platform", "linux/arm64", "--entrypoint", "/bin/uname",
                 "enginebuild/demo:latest-arm64", "-m").stdout.strip()
    assert out == "aarch64"
    proc = docker("run", "--rm", "--platform", "linux/arm64", "-e", "SERVED_MODEL_NAME=tiny", "--entrypoint",
                  "/bin/sh", "enginebuild/demo:latest-arm64", "-c",
                  "mkdir -p /models/demo-model && timeout 5 /opt/enginebuild/bin/launch_server.sh; true", check=False)
    assert "aux_hidden_state_layers=(2, 17, 32, 47, 62)" in proc.stdout, proc.stdout + proc.stderr
    report.count("platforms", "arm64 containers run under emulation")


def test_a_push_uploads_both_platforms_and_an_index(built_demo, workspace, registry):
    repository = f"enginebuild-test/multi-{uuid.uuid4().hex[:6]}"
    proc = run_cli(["push", "demo", "--to", f"{registry.host}/{repository}", "--tag", "v1"], workspace)
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.strip().splitlines()[-1]
    base = f"http://{registry.host}/v2/{repository}"
    head = requests.get(f"{base}/manifests/v1", headers={"Accept": INDEX})
    assert head.headers["Content-Type"] == INDEX
    digest = head.headers["Docker-Content-Digest"]
    assert printed == f"{registry.host}/{repository}@{digest}"
    index = head.json()
    platforms = {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"] for m in index["manifests"]}
    assert sorted(platforms) == ["linux/amd64", "linux/arm64"]
    for platform, manifest_digest in platforms.items():
        body = requests.get(f"{base}/manifests/{manifest_digest}", headers={"Accept": MANIFEST}).json()
        config = requests.get(f"{base}/blobs/{body['config']['digest']}").json()
        assert config["architecture"] == platform.split("/")[1]
        assert config.get("variant") == ("v8" if platform.endswith("arm64") else None)
    record = next(r for r in json.loads((workspace / "lockfiles/demo.pushes.json").read_text())["pushes"]
                  if r["repository"].endswith(repository))
    assert record["digest"] == digest and record["platforms"] == platforms
    report.count("platforms", "multi-platform pushes read back as an index of two manifests")


def test_a_registry_that_refuses_the_index_gets_a_clear_error_and_nothing_is_recorded(built_demo, workspace,
                                                                                      registry):
    proxy = FaultProxy(registry.host)
    try:
        repository = f"enginebuild-test/noindex-{uuid.uuid4().hex[:6]}"
        proxy.add("PUT", rf"/v2/{repository}/manifests/v1$", "status", status=400, times=5)
        records = workspace / "lockfiles/demo.pushes.json"
        before = records.read_bytes() if records.exists() else None
        proc = run_cli(["push", "demo", "--to", f"{proxy.host}/{repository}", "--tag", "v1"], workspace)
    finally:
        proxy.shutdown()
    assert proc.returncode == 1
    assert "the registry refused the image index that ties the" in proc.stderr
    assert "push one platform" in proc.stderr
    assert (records.read_bytes() if records.exists() else None) == before
