"""The OCI distribution client against real registries: plain, Basic-less Bearer token flow."""
import base64
import json

import pytest
import requests

from enginebuild.errors import RegistryError
from enginebuild.lock.lockfile import read_lock
from enginebuild.oci.reference import parse_image_ref
from enginebuild.oci.registry import RegistryClient, parse_challenge
from enginebuild.recipe.catalog import Catalog
from helpers.inprocess import run_in_process
from helpers.registry import push_blob_image
from helpers.specs import write_image


def base_pin(workspace, name="t"):
    return read_lock(workspace, Catalog(workspace).load(name)).raw("runtime.base@linux/amd64")


@pytest.mark.registry
def test_lock_resolves_a_base_tag_to_the_digest_the_registry_serves(registry, workspace):
    digest = push_blob_image(registry.host, "enginebuild-test/base", "2026090302")
    write_image(workspace, "t", f"base: {registry.host}/enginebuild-test/base:2026090302\nplatform: linux/amd64\n")
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 0, proc.stderr
    base = base_pin(workspace)
    head = requests.head(f"http://{registry.host}/v2/enginebuild-test/base/manifests/2026090302",
                         headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    assert base["digest"] == digest == head.headers["Docker-Content-Digest"]
    assert base["ref"] == f"{registry.host}/enginebuild-test/base@{digest}"


@pytest.mark.registry
def test_a_moved_tag_keeps_its_locked_digest_until_lock_update(registry, workspace):
    first = push_blob_image(registry.host, "enginebuild-test/moving", "nightly")
    write_image(workspace, "t", f"base: {registry.host}/enginebuild-test/moving:nightly\nplatform: linux/amd64\n")
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    second = push_blob_image(registry.host, "enginebuild-test/moving", "nightly", salt="next night")
    assert second != first
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    assert base_pin(workspace)["digest"] == first
    assert run_in_process(["lock", "--update", "t"], workspace).returncode == 0
    assert base_pin(workspace)["digest"] == second


@pytest.mark.registry
def test_a_missing_tag_is_a_clear_error(registry):
    with pytest.raises(RegistryError) as info:
        RegistryClient().manifest(parse_image_ref(f"{registry.host}/enginebuild-test/none:1"))
    assert info.value.message == f"{registry.host}/enginebuild-test/none:1: no such manifest in {registry.host}"


def _bearer_for_push(token_registry, repository):
    tokens = token_registry.extra["tokens"]
    answer = requests.get(tokens.realm, params={"service": tokens.service, "scope": f"repository:{repository}:pull,push"},
                          auth=("tester", "s3cret-registry-password"))
    return "Bearer " + answer.json()["token"]


@pytest.mark.registry
def test_the_bearer_token_flow_asks_for_exactly_the_scope_the_registry_named(token_registry):
    repository = "enginebuild-test/private"
    digest = push_blob_image(token_registry.host, repository, "1", auth=_bearer_for_push(token_registry, repository))
    tokens = token_registry.extra["tokens"]
    tokens.requests.clear()
    resolved, _, _ = RegistryClient().manifest(parse_image_ref(f"{token_registry.host}/{repository}:1"))
    assert resolved == digest
    assert tokens.requests == [{"scope": f"repository:{repository}:pull", "service": tokens.service, "user": None}]


@pytest.mark.registry
def test_the_token_flow_sends_stored_credentials_without_printing_them(token_registry, tmp_path, monkeypatch, workspace):
    repository = "enginebuild-test/creds"
    push_blob_image(token_registry.host, repository, "1", auth=_bearer_for_push(token_registry, repository))
    config = tmp_path / "docker"
    config.mkdir()
    auth = base64.b64encode(b"tester:s3cret-registry-password").decode()
    (config / "config.json").write_text(json.dumps({"auths": {token_registry.host: {"auth": auth}}}))
    tokens = token_registry.extra["tokens"]
    tokens.requests.clear()
    write_image(workspace, "t", f"base: {token_registry.host}/{repository}:1\nplatform: linux/amd64\n")
    proc = run_in_process(["lock", "t"], workspace, env={"DOCKER_CONFIG": str(config)})
    assert proc.returncode == 0, proc.stderr
    assert tokens.requests[-1]["user"] == "tester"
    assert "s3cret-registry-password" not in proc.stdout + proc.stderr
    assert "s3cret-registry-password" not in (workspace / "lockfiles/t.lock").read_text()


@pytest.mark.registry
def test_wrong_credentials_say_to_log_in(token_registry, tmp_path, workspace):
    config = tmp_path / "docker"
    config.mkdir()
    auth = base64.b64encode(b"tester:wrong").decode()
    (config / "config.json").write_text(json.dumps({"auths": {token_registry.host: {"auth": auth}}}))
    write_image(workspace, "t", f"base: {token_registry.host}/enginebuild-test/private:1\nplatform: linux/amd64\n")
    proc = run_in_process(["lock", "t"], workspace, env={"DOCKER_CONFIG": str(config)})
    assert proc.returncode == 1
    assert "t: runtime.base@linux/amd64 is NOT pinned: token service" in proc.stderr
    assert "answered HTTP 401" in proc.stderr


def test_challenges_are_parsed_like_the_registries_send_them():
    scheme, params = parse_challenge('Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:a/b:pull"')
    assert scheme == "bearer"
    assert params == {"realm": "https://ghcr.io/token", "service": "ghcr.io", "scope": "repository:a/b:pull"}


def test_references_normalise_like_the_docker_cli():
    ref = parse_image_ref("vllm/vllm-openai:v0.24.0")
    assert (ref.registry, ref.repository, ref.tag) == ("registry-1.docker.io", "vllm/vllm-openai", "v0.24.0")
    assert parse_image_ref("ubuntu").repository == "library/ubuntu"
    nv = parse_image_ref("nvcr.io/nvidia/cuda:13.0.0-devel-ubuntu24.04")
    assert (nv.registry, nv.repository) == ("nvcr.io", "nvidia/cuda")
    pinned = parse_image_ref("ghcr.io/spark-arena/dgx-vllm-eugr-nightly@sha256:" + "a" * 64)
    assert pinned.pinned and pinned.tag is None


BAD_TARGETS = [
    ("127.0.0.1:5055", "has no repository"),
    ("127.0.0.1:5000/Upper/Case", "must be lower case"),
    ("127.0.0.1:5000/with space", "ASCII"),
    ("127.0.0.1:5000/a/../b", "'..'"),
    ("127.0.0.1:5000//a", "'//'"),
    ("127.0.0.1:5000/a/", "end with '/'"),
    ("-127.0.0.1:5000/a", "start with '-'"),
    ("127.0.0.1:5000/caf\u00e9", "ASCII"),
    ("127.0.0.1:5000/" + "a" * 260, "at most 255"),
    ("127.0.0.1:5000/x/demo:", "is not a valid tag"),
    ("demo", "has no repository"),
    ("docker.io", "has no repository"),
    ("registry/repo", "is not a registry host"),
]


@pytest.mark.parametrize("target,why", BAD_TARGETS, ids=[t[:30] for t, _ in BAD_TARGETS])
def test_a_bad_push_target_is_refused_before_anything_is_sent(target, why, workspace):
    proc = run_in_process(["push", "demo", f"--to={target}"], workspace)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: --to {target!r}:") and why in proc.stderr
    assert not (workspace / "lockfiles/demo.pushes.json").exists()


@pytest.mark.docker
@pytest.mark.network
def test_a_push_to_a_port_where_nothing_listens_fails_at_once(workspace, docker_engine, debian_reachable):
    import time

    # one platform: the arm64 build (qemu) is minutes of a worker that has not made it yet
    assert run_in_process(["image", "demo", "--platform", "linux/amd64"], workspace).returncode == 0
    start = time.monotonic()
    proc = run_in_process(["push", "demo", "--platform", "linux/amd64", "--to", "127.0.0.1:9/enginebuild/demo"], workspace)
    took = time.monotonic() - start
    assert proc.returncode == 1
    assert "connection refused by 127.0.0.1:9" in proc.stderr
    assert "nothing accepts connections there" in proc.stderr
    assert took < 10, f"took {took:.1f}s"
    assert not (workspace / "lockfiles/demo.pushes.json").exists()
