"""Publishing the way a recipe repository does it: every push carries an SBOM (CycloneDX 1.6)
and a provenance statement (in-toto v1, SLSA provenance v1) as OCI referrers, found through the
referrers tag scheme on a registry without the referrers API; the CI job's script builds only
the images the registry lacks and pushes them by digest; the workflows we ship pass zizmor and
actionlint."""
import hashlib
import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from conftest import ROOT
from enginebuild.io.store import Store
from helpers.inprocess import run_in_process

pytestmark = [pytest.mark.docker, pytest.mark.network, pytest.mark.registry]

AMD64 = ["--platform", "linux/amd64"]
SCHEMAS = Path(__file__).parent / "schemas"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def get(host, repository, kind, reference, accept=None):
    response = requests.get(f"http://{host}/v2/{repository}/{kind}/{reference}",
                            headers={"Accept": accept} if accept else {})
    response.raise_for_status()
    return response


def lock_pins(workspace, name="demo", tools=True) -> set:
    """Every sha256 and commit the lock pins (the values, wherever they are in the document);
    without the host tools (cuobjdump: it reads the image, it is not in it) when tools=False."""
    pins = set()

    def walk(node, key=""):
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key in ("sha256", "commit", "digest") and re.fullmatch(
                r"(sha256:)?[0-9a-f]{40}([0-9a-f]{24})?", node):
            pins.add(node.split(":")[-1])

    inputs = json.loads((workspace / f"lockfiles/{name}.lock").read_text())["inputs"]
    walk({k: v for k, v in inputs.items() if tools or not k.startswith("tools.")})
    return pins


def test_a_push_attaches_an_sbom_and_a_provenance_found_through_the_fallback_tag(workspace, registry, docker_engine,
                                                                                  debian_reachable, pypi_reachable):
    import jsonschema  # here, not at the top: importing it takes seconds, which collecting the fast tier would pay
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    per_build = ["--set", "labels[release]=rc1"]  # a per-build value: the provenance says it
    assert run_in_process(["image", "demo", *AMD64, *per_build], workspace).returncode == 0
    repository = f"enginebuild-test/attached-{uuid.uuid4().hex[:8]}"
    proc = run_in_process(["push", "demo", *AMD64, *per_build, "--to", f"{registry.host}/{repository}", "--tag", "v1"],
                   workspace)
    assert proc.returncode == 0, proc.stderr
    digest = proc.stdout.strip().rsplit("@", 1)[1]
    record = json.loads((workspace / "lockfiles/demo.pushes.json").read_text())["pushes"][0]
    assert record["digest"] == digest and set(record["attached"]) == {"sbom", "provenance"}
    assert f"sbom {record['attached']['sbom']}" in proc.stderr

    index = get(registry.host, repository, "manifests", digest.replace(":", "-"), OCI_INDEX).json()
    kinds = {m["artifactType"]: m["digest"] for m in index["manifests"]}
    assert set(kinds) == {"application/vnd.cyclonedx+json", "application/vnd.in-toto+json"}
    assert kinds["application/vnd.cyclonedx+json"] == record["attached"]["sbom"]
    documents = {}
    for kind, ref_digest in kinds.items():
        manifest = get(registry.host, repository, "manifests", ref_digest, OCI_MANIFEST).json()
        assert manifest["subject"]["digest"] == digest  # it refers to the pushed image
        assert manifest["artifactType"] == kind
        documents[kind] = get(registry.host, repository, "blobs", manifest["layers"][0]["digest"]).text

    sbom = documents["application/vnd.cyclonedx+json"]
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(sbom) is None
    provenance = json.loads(documents["application/vnd.in-toto+json"])
    jsonschema.Draft202012Validator(json.loads((SCHEMAS / "slsa-provenance-v1.statement.json").read_text()),
                                    format_checker=jsonschema.FormatChecker()).validate(provenance)
    assert provenance["subject"][0]["digest"]["sha256"] == digest.split(":")[1]
    assert provenance["predicate"]["buildDefinition"]["externalParameters"]["set"] == ["labels[release]=rc1"]

    pins = lock_pins(workspace)
    assert len(pins) > 20  # debs, wheels, the nvcc wheels, the cuobjdump tool
    assert sorted(p for p in lock_pins(workspace, tools=False) if p not in sbom) == []
    # the provenance names every input of the lock: a base by its digest, a package set by the
    # digest of its pin (which holds each package's sha256)
    resolved = provenance["predicate"]["buildDefinition"]["resolvedDependencies"]
    dependencies = json.dumps(resolved)
    inputs = json.loads((workspace / "lockfiles/demo.lock").read_text())["inputs"]
    by_name = {d["name"]: d["digest"] for d in resolved if "name" in d}
    for name, entry in inputs.items():
        pin = entry["resolved"]
        if "packages" in pin or "files" in pin:
            canonical = json.dumps(pin, sort_keys=True, separators=(",", ":")).encode()
            assert by_name[name] == {"sha256": hashlib.sha256(canonical).hexdigest()}, name
        else:
            assert set(by_name[name].values()) & {pin.get("sha256"), pin.get("commit"),
                                                  (pin.get("digest") or ":").split(":")[1]}, name
    patch = (workspace / "patches/demo-engine/0001-aux-layer-ids-off-by-one.patch").read_bytes()
    patch_sha = hashlib.sha256(patch).hexdigest()
    assert patch_sha in sbom and patch_sha in dependencies
    spec_sha = hashlib.sha256((workspace / "images/demo/image.yaml").read_bytes()).hexdigest()
    assert spec_sha in dependencies  # the build definition: the spec and the lock


@pytest.fixture(scope="module")
def installed(tmp_path_factory, pypi_reachable):
    """The workflow's set-up: enginebuild pip-installed; the recipe repository carries none of it."""
    from helpers.installed import install_enginebuild

    return {"ENGINEBUILD_COMMAND": str(install_enginebuild(tmp_path_factory.mktemp("installed")))}


def body_of_key(path) -> str:
    return "".join(path.read_text().splitlines()[1:-1])[:40]


def recipe_job(script, workspace, env):
    """A job of the publish workflow: enginebuild's script run on the recipe repository's checkout."""
    assert not (workspace / "BUILD.py").exists() and not (workspace / "scripts").exists()
    return subprocess.run(["bash", str(ROOT / "scripts" / script[0]), *script[1:]], cwd=ROOT, capture_output=True,
                          text=True, timeout=1800, env={**env, "ENGINEBUILD_RECIPE_ROOT": str(workspace)})


def publish(workspace, prefix, push, tmp_path, installed, extra=None):
    summary = tmp_path / f"summary-{uuid.uuid4().hex[:6]}.md"
    outputs = tmp_path / f"outputs-{uuid.uuid4().hex[:6]}"
    env = {**os.environ, "ENGINEBUILD_PUBLISH_TO": prefix, "ENGINEBUILD_PUBLISH_PUSH": push,
           "ENGINEBUILD_PLATFORM": "linux/amd64", "ENGINEBUILD_PUBLISH_IMAGES": "demo",
           "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567",
           "GITHUB_OUTPUT": str(outputs), **installed, **(extra or {})}
    proc = recipe_job(["ci-publish.sh"], workspace, env)
    publish.outputs = outputs.read_text() if outputs.exists() else ""  # the job's outputs (GITHUB_OUTPUT)
    return proc, summary.read_text() if summary.exists() else ""


def test_the_ci_job_builds_and_pushes_what_changed_and_skips_what_the_registry_has(workspace, registry, tmp_path, installed,
                                                                                  docker_engine, debian_reachable,
                                                                                  pypi_reachable):
    prefix = f"{registry.host}/recipes-{uuid.uuid4().hex[:6]}"
    proc, summary = publish(workspace, prefix, "false", tmp_path, installed)  # a pull request: builds, pushes nothing
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "demo: building for linux/amd64" in proc.stdout and "| demo | built, not pushed | - |" in summary
    assert requests.get(f"http://{registry.host}/v2/{prefix.split('/', 1)[1]}/demo/tags/list").status_code == 404

    proc, summary = publish(workspace, prefix, "true", tmp_path, installed)  # main: pushed by digest, three tags
    assert proc.returncode == 0, proc.stdout + proc.stderr
    digest = re.search(r"demo: pushed \S+@(sha256:[0-9a-f]{64})", proc.stdout).group(1)
    assert f"| demo | pushed | `{prefix}/demo@{digest}` |" in summary
    tags = requests.get(f"http://{registry.host}/v2/{prefix.split('/', 1)[1]}/demo/tags/list").json()["tags"]
    content = [t for t in tags if t.startswith("sha-") and len(t) == 20]
    assert sorted(set(tags) - {digest.replace(":", "-")}) == sorted(["latest", "git-0123456789ab", *content])
    record = json.loads((workspace / "lockfiles/demo.pushes.json").read_text())["pushes"]
    assert {r["tag"] for r in record} == {"latest", "git-0123456789ab", content[0]}
    assert {r["digest"] for r in record} == {digest}
    assert "REGISTRY_TOKEN" not in proc.stdout + proc.stderr
    # the signing job's input, then what it runs (here with a key; keyless: tests/test_signing.py)
    assert publish.outputs == f"pushed={prefix}/demo@{digest}\n"
    key = tmp_path / "cosign.key"
    signing_key = ec.generate_private_key(ec.SECP256R1())
    key.write_bytes(signing_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    key.with_suffix(".pub").write_bytes(signing_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    pushed = publish.outputs.strip().split("=", 1)[1].split()
    assert run_in_process(["verify", "--signature", "--key", key.with_suffix(".pub"), *pushed], workspace).returncode == 1
    signed = run_in_process(["sign", *pushed, "--key", key], workspace)
    assert signed.returncode == 0, signed.stderr
    checked = run_in_process(["verify", "--signature", "--key", key.with_suffix(".pub"), *pushed], workspace)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    proc, summary = publish(workspace, prefix, "true", tmp_path, installed)  # nothing changed: nothing built or pushed
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"demo: unchanged ({prefix}/demo:{content[0]} is {digest})" in proc.stdout
    assert "building" not in proc.stdout and "| demo | unchanged |" in summary

    launcher = workspace / "images/demo/launch_server.sh"
    launcher.write_text(launcher.read_text() + "# tuned\n")
    proc, _ = publish(workspace, prefix, "true", tmp_path, installed,  # an edit: that image again, a new digest,
                      {"ENGINEBUILD_SIGNING_KEY": key.read_text()})  # signed as it is pushed (the key a secret)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    edited = re.search(r"demo: pushed (\S+@sha256:[0-9a-f]{64})", proc.stdout).group(1)
    assert edited.rsplit("@", 1)[1] != digest
    assert body_of_key(key) not in proc.stdout + proc.stderr
    checked = run_in_process(["verify", "--signature", "--key", key.with_suffix(".pub"), edited], workspace)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_spread_jobs_build_one_component_each_and_the_last_job_assembles_from_the_cache(workspace, registry, tmp_path, installed,
                                                                                      docker_engine, debian_reachable,
                                                                                      pypi_reachable):
    prefix = f"{registry.host}/spread-{uuid.uuid4().hex[:6]}"
    base = {**os.environ, "ENGINEBUILD_PUBLISH_TO": prefix, "ENGINEBUILD_PUBLISH_PUSH": "true",
            "ENGINEBUILD_PLATFORM": "linux/amd64", "ENGINEBUILD_PUBLISH_IMAGES": "demo",
            "GITHUB_OUTPUT": str(tmp_path / "github-output"), **installed}

    def job(*args, **env):  # each job on a runner of its own: an empty store
        home = tmp_path / f"runner-{uuid.uuid4().hex[:6]}"
        return recipe_job(args, workspace, {**base, "ENGINEBUILD_HOME": str(home), **env})

    planned = job("ci-components.sh", "plan")
    assert planned.returncode == 0, planned.stderr
    matrix = json.loads((tmp_path / "github-output").read_text().split("matrix=", 1)[1])
    assert sorted(row["component"] for row in matrix["include"]) == ["cuda-kernels", "engine", "engine-py", "kernels"]
    assert {row["image"] for row in matrix["include"]} == {"demo"}
    for row in matrix["include"]:
        built = job("ci-components.sh", "build", ENGINEBUILD_IMAGE=row["image"],
                    ENGINEBUILD_COMPONENT=row["component"])
        assert built.returncode == 0, built.stderr
        assert f"component(s) {row['component']}:" in built.stdout and f"{prefix}/enginebuild-cache" in built.stdout
    # nothing left to spread; the last job builds no component: every output comes from the cache
    assert "matrix={\"include\": []}" in job("ci-components.sh", "plan").stdout
    summary = tmp_path / "summary.md"
    last = job("ci-publish.sh", GITHUB_STEP_SUMMARY=str(summary))
    assert last.returncode == 0, last.stdout + last.stderr
    assert "component(s)" not in last.stdout and "pulled" in last.stdout, last.stdout
    assert re.search(r"demo: pushed \S+@sha256:[0-9a-f]{64}", last.stdout)


def test_the_ci_job_refuses_a_bad_push_setting_before_doing_anything(workspace, tmp_path, installed):
    proc, _ = publish(workspace, "127.0.0.1:9/x", "yes", tmp_path, installed)
    assert proc.returncode == 2 and "ENGINEBUILD_PUBLISH_PUSH must be true or false" in proc.stderr
    proc, _ = publish(workspace, "127.0.0.1:9/x", "true", tmp_path, installed, {"ENGINEBUILD_PUBLISH_COMPRESSION": "lz4"})
    assert proc.returncode == 2 and "ENGINEBUILD_PUBLISH_COMPRESSION must be gzip, gzip-isal or zstd, not 'lz4'" in proc.stderr


def lint(*files):
    return subprocess.run(["bash", str(ROOT / "scripts/lint-workflows.sh"), *map(str, files)], capture_output=True,
                          text=True, timeout=600)


def test_the_workflows_we_ship_pass_zizmor_and_actionlint():
    workflows = sorted((ROOT / ".github/workflows").glob("*.yml"))
    assert {p.name for p in workflows} >= {"enginebuild.yml", "enginebuild-publish.yml"}
    proc = lint()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout + proc.stderr
    assert f"actionlint: {len(workflows)} file(s), 0 finding(s)" in proc.stdout
    for path in workflows:  # every action pinned to a full commit, its version in a comment
        for line in path.read_text().splitlines():
            if re.match(r"\s*-?\s*uses:", line) and not line.strip().startswith("#"):
                assert re.search(r"@[0-9a-f]{40}\s+# v\d", line), line


def test_the_linters_find_an_unpinned_action_and_a_template_injection(tmp_path):
    bad = tmp_path / "bad.yml"
    text = (ROOT / ".github/workflows/enginebuild.yml").read_text()
    text = re.sub(r"actions/checkout@[0-9a-f]{40}", "actions/checkout@v4", text)
    text = text.replace("run: python BUILD.py lock --check", 'run: echo "${{ github.event.pull_request.title }}"')
    bad.write_text(text)
    proc = lint(bad)
    assert proc.returncode == 1
    out = proc.stdout + proc.stderr
    assert "unpinned-uses" in out and "template-injection" in out
    assert "potentially untrusted" in out  # actionlint's finding of the same injection


def test_images_with_the_same_inputs_have_the_same_sbom_whatever_their_digest(tmp_path):
    from enginebuild.io.store import Store
    from enginebuild.publish.sbom import make_sbom, write_sbom
    from enginebuild.workspace import Workspace

    ws = Workspace(ROOT)
    spec = ws.spec("demo")
    lock = ws.lock(spec)
    store = Store(tmp_path / "home")
    outputs = {"engine": {"key": "k" * 64, "sha256": "e" * 64}}
    fresh = write_sbom(spec, lock, "ghcr.io/acme/demo", outputs)
    assert make_sbom(spec, lock, "ghcr.io/acme/demo", outputs, store) == fresh  # written
    assert make_sbom(spec, lock, "ghcr.io/acme/demo", outputs, store) == fresh  # kept
    assert len(list((tmp_path / "home/records/sboms").iterdir())) == 1
    other = make_sbom(spec, lock, "ghcr.io/acme/demo", {}, store)  # other inputs: another document
    assert other == write_sbom(spec, lock, "ghcr.io/acme/demo", {}) != fresh
    assert "e" * 64 in fresh.decode() and "e" * 64 not in other.decode()


def test_a_push_without_load_leaves_the_engine_without_the_image_and_pushes_what_a_loaded_build_pushes(
        workspace, registry, docker_engine, debian_reachable, pypi_reachable):
    from helpers.docker import docker

    probe = ["--set", f"labels[probe]={uuid.uuid4().hex[:12]}"]  # an image no other test has made
    first = f"{registry.host}/enginebuild-test/no-load-{uuid.uuid4().hex[:8]}"
    proc = run_in_process(["image", "demo", *AMD64, *probe, "--no-load", "--push", "--to", first, "--push-tag", "v1"],
                   workspace)
    assert proc.returncode == 0, proc.stderr
    image_id = re.search(r"not loaded \(image (sha256:[0-9a-f]+)\)", proc.stdout).group(1)
    pushed = proc.stdout.strip().splitlines()[-1].rsplit("@", 1)[1]
    engine_ids = docker("images", "-q", "--no-trunc").stdout.split()
    assert not [i for i in engine_ids if i.startswith(image_id)], "the image was loaded"
    refused = run_in_process(["image", "demo", *AMD64, "--no-load", "-t", "mine:1"], workspace)
    assert refused.returncode == 2 and "--no-load with -t: -t needs the image in the engine" in refused.stderr
    # the same build loaded, then pushed: the same manifest digest
    assert run_in_process(["image", "demo", *AMD64, *probe], workspace).returncode == 0
    assert [i for i in docker("images", "-q", "--no-trunc").stdout.split() if i.startswith(image_id)]
    second = f"{registry.host}/enginebuild-test/loaded-{uuid.uuid4().hex[:8]}"
    again = run_in_process(["push", "demo", *AMD64, *probe, "--to", second, "--tag", "v1"], workspace)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().rsplit("@", 1)[1] == pushed


def test_a_push_after_a_launcher_edit_sends_the_new_layer_and_small_documents_not_the_sbom_again(
        workspace, registry, docker_engine, debian_reachable, pypi_reachable):
    repository = f"enginebuild-test/edited-{uuid.uuid4().hex[:8]}"
    target = f"{registry.host}/{repository}"
    digests, attached = [], []
    for round_ in range(2):
        if round_:
            launcher = workspace / "images/demo/launch_server.sh"
            launcher.write_text(launcher.read_text() + "# edited\n")
        assert run_in_process(["image", "demo", *AMD64], workspace).returncode == 0
        proc = run_in_process(["push", "demo", *AMD64, "--to", target, "--tag", f"v{round_}"], workspace)
        assert proc.returncode == 0, proc.stderr
        digests.append(proc.stdout.strip().rsplit("@", 1)[1])
        index = get(registry.host, repository, "manifests", digests[-1].replace(":", "-"), OCI_INDEX).json()
        layers = {}
        for ref in index["manifests"]:
            manifest = get(registry.host, repository, "manifests", ref["digest"], OCI_MANIFEST).json()
            assert manifest["subject"]["digest"] == digests[-1]
            layers[ref["artifactType"]] = manifest["layers"][0]
        attached.append(layers)
    assert digests[0] != digests[1]
    sbom = "application/vnd.cyclonedx+json"
    assert attached[0][sbom] == attached[1][sbom]  # one document: the registry had it already
    assert attached[1]["application/vnd.in-toto+json"]["size"] < 8192  # the statement naming the new digest


def test_the_sbom_of_an_image_whose_closure_holds_a_component_wheel_is_valid():
    """A distribution the image's own component builds has no version in the lock (it is known
    once built): the SBOM names it as the component's, where it once stopped the push (the strict
    CycloneDX validation of a document this size takes a minute: the push test validates the demo's)."""
    from enginebuild.lock.lockfile import read_lock
    from enginebuild.publish.sbom import write_sbom
    from enginebuild.recipe.catalog import Catalog

    spec = Catalog(ROOT).load("qwen36-dflash-pypi")
    lock = read_lock(ROOT, spec)
    document = write_sbom(spec, lock, "127.0.0.1:5000/qwen36-dflash-pypi", {}).decode()
    components = {c["bom-ref"]: c for c in json.loads(document)["components"]}
    assert components["runtime.python@linux/amd64/vllm"]["version"] == "component"
    assert "components.vllm-kernels.release@linux/arm64" in components


def test_a_zstd_push_has_zstd_layers_that_unpack_to_the_images_diff_ids_and_a_second_push_sends_none(
        workspace, registry, docker_engine, debian_reachable, pypi_reachable):
    import zstandard

    repository = f"enginebuild-test/zstd-{uuid.uuid4().hex[:8]}"
    target = f"{registry.host}/{repository}"
    pushes = []
    for _ in range(2):
        proc = run_in_process(["image", "demo", *AMD64, "--no-load", "--push", "--to", target, "--compression", "zstd"],
                       workspace)
        assert proc.returncode == 0, proc.stderr
        pushes.append(proc)
    digest = pushes[0].stdout.strip().splitlines()[-1].rsplit("@", 1)[1]
    assert pushes[1].stdout.strip().splitlines()[-1].rsplit("@", 1)[1] == digest  # the same bytes again
    assert re.search(r"0 blob\(s\) uploaded \(0 bytes\), \d+ already there", pushes[1].stderr), pushes[1].stderr
    records = json.loads((workspace / "lockfiles/demo.pushes.json").read_text())
    assert [r["compression"] for r in records["pushes"] if r["repository"] == target] == ["zstd"]  # one tag
    manifest = get(registry.host, repository, "manifests", digest, OCI_MANIFEST).json()
    config = get(registry.host, repository, "blobs", manifest["config"]["digest"]).json()
    assert {layer["mediaType"] for layer in manifest["layers"]} == {"application/vnd.oci.image.layer.v1.tar+zstd"}
    for layer, diff_id in zip(manifest["layers"], config["rootfs"]["diff_ids"], strict=True):
        body = get(registry.host, repository, "blobs", layer["digest"]).content
        assert "sha256:" + hashlib.sha256(body).hexdigest() == layer["digest"]
        tar = zstandard.ZstdDecompressor().stream_reader(body).read()
        assert "sha256:" + hashlib.sha256(tar).hexdigest() == diff_id
    tags = requests.get(f"http://{registry.host}/v2/{repository}/tags/list").json()["tags"]
    assert [t for t in tags if t.startswith("sha-")] and all(t.endswith("-zstd") for t in tags if t.startswith("sha-"))
    # the same image gzipped: other layer digests, the same diff IDs (one image, two encodings)
    gz = f"{registry.host}/{repository}-gz"
    proc = run_in_process(["image", "demo", *AMD64, "--no-load", "--push", "--to", gz], workspace)
    assert proc.returncode == 0, proc.stderr
    other = get(registry.host, f"{repository}-gz", "manifests", proc.stdout.strip().splitlines()[-1].rsplit("@", 1)[1],
                OCI_MANIFEST).json()
    assert other["config"]["digest"] == manifest["config"]["digest"]
    assert not {la["digest"] for la in other["layers"]} & {la["digest"] for la in manifest["layers"]}


def test_a_push_to_another_repository_of_the_same_registry_mounts_the_layers_instead_of_sending_them(
        workspace, registry, docker_engine, debian_reachable, pypi_reachable):
    """The store remembers which repositories hold each compressed layer it pushed; a push to
    another repository of that registry links them there (cross-repository mount): no layer
    compressed or sent again, and the new repository serves every blob of the same manifest."""
    name = uuid.uuid4().hex[:8]
    first, second = (f"enginebuild-test/mount-{name}-{n}" for n in ("a", "b"))
    pushes = []
    for repository in (first, second):
        proc = run_in_process(["image", "demo", *AMD64, "--no-load", "--push", "--to", f"{registry.host}/{repository}",
                        "--push-tag", "v1"], workspace)
        assert proc.returncode == 0, proc.stderr
        pushes.append(proc.stdout.strip().splitlines()[-1].rsplit("@", 1)[1])
    assert pushes[0] == pushes[1]
    records = json.loads((workspace / "lockfiles/demo.pushes.json").read_text())["pushes"]
    record = next(r for r in records if r["repository"] == f"{registry.host}/{second}")
    manifest = get(registry.host, second, "manifests", pushes[1], OCI_MANIFEST).json()
    assert record["layers_pushed"] == 0 and record["layers_mounted"] == len(manifest["layers"]) > 0, record
    for layer in manifest["layers"]:
        body = get(registry.host, second, "blobs", layer["digest"]).content
        assert "sha256:" + hashlib.sha256(body).hexdigest() == layer["digest"]


OFFLINE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9",
           "https_proxy": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def _stored_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in (home / "cas").rglob("*") if p.is_file())


def test_a_fresh_runner_with_the_registry_cache_makes_and_downloads_nothing_and_pushes_only_the_manifest(
        workspace, registry, tmp_path, docker_engine, debian_reachable, pypi_reachable):
    """The CI job on a second fresh runner (an empty store, PyPI and Debian out of reach): every
    layer is stood in by the cache's description, no component is built and nothing downloaded,
    the kernels and closure verdicts are those the first runner recorded, and its push uploads
    nothing (the manifest it puts is the first runner's, by digest). A third runner asked for
    other checks has no verdict to take: it fetches the layers' compressed blobs from the
    registry, unpacks them to their diff IDs and checks them itself."""
    probe = ["--set", f"labels[probe]={uuid.uuid4().hex[:12]}"]  # an image no other test has made
    target = f"{registry.host}/enginebuild-test/subst-{uuid.uuid4().hex[:8]}"
    cache = f"{registry.host}/enginebuild-test/subst-cache-{uuid.uuid4().hex[:8]}"

    def runner(*extra: str, offline: bool = False):
        home = tmp_path / f"runner-{uuid.uuid4().hex[:6]}"
        env = {"ENGINEBUILD_HOME": str(home), **(OFFLINE if offline else {})}
        proc = run_in_process(["image", "demo", *AMD64, *probe, *extra, "--no-load", "--cache", cache, "--push", "--to",
                        target, "--push-tag", "v1"], workspace, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return home, proc.stdout + proc.stderr, proc.stdout.strip().splitlines()[-1].rsplit("@", 1)[1]

    first_home, said, pushed = runner()
    assert "stood in" not in said and "kernels: demo (linux/amd64): ok" in said, said[-3000:]
    second_home, said, again = runner(offline=True)
    assert again == pushed
    assert re.search(r"\d+ layer\(s\) stood in by \S+subst-cache-\S+ \(made and pushed elsewhere\): nothing built or "
                     r"downloaded", said), said[-3000:]
    assert "component" not in said and "downloading" not in said, said[-3000:]
    assert "kernels: demo (linux/amd64): ok" in said and "the verdict recorded in" in said, said[-3000:]
    assert ": 0 blob(s) uploaded (0 bytes)" in said, said[-3000:]
    assert _stored_bytes(second_home) < 64 << 10 < _stored_bytes(first_home)  # records, not layers

    # other checks asked: no verdict recorded for them; the layers' bytes come from the registry
    # (online: the kernels check takes its pinned cuobjdump from PyPI)
    third_home, said, third = runner("--set", "runtime-check.skip=[{path: /nowhere, why: not shipped}]")
    assert third == pushed and "stood in by" in said and "the verdict recorded in" not in said, said[-3000:]
    assert "kernels: demo (linux/amd64): ok" in said and "runtime: " in said, said[-3000:]
    layers = json.loads(get(registry.host, target.split("/", 1)[1], "manifests", pushed, OCI_MANIFEST).text)
    config = json.loads(get(registry.host, target.split("/", 1)[1], "blobs", layers["config"]["digest"]).content)
    for diff_id in config["rootfs"]["diff_ids"]:  # each unpacked from its compressed blob, by its diff ID
        assert hashlib.sha256(Store(third_home).path(diff_id[7:]).read_bytes()).hexdigest() == diff_id[7:]

    # a launcher edit on a fourth fresh runner: every other layer stood in, only the edited
    # file's layer written (no component built or pulled), and its push uploads that layer alone;
    # the checks read nothing in a layer of scripts (registrycache/inert.py), so the first runner's
    # verdict answers for the new image and no other layer's bytes are fetched
    launcher = workspace / "images/demo/launch_server.sh"
    launcher.write_text(launcher.read_text() + "# tuned\n")
    fourth_home, said, edited = runner()
    assert edited != pushed and re.search(r"layer\(s\) stood in by \S+ \(made and pushed elsewhere\); 1 to make here",
                                          said), said[-3000:]
    assert "wrote 1 layer(s)" in said and "component" not in said and "pulled" not in said, said[-3000:]
    assert "runtime: demo (linux/amd64): runtime closure ok" in said and "the verdict recorded in" in said, said[-3000:]
    assert _stored_bytes(fourth_home) < 1 << 20, _stored_bytes(fourth_home)
    assert ": 1 blob(s) uploaded" in said, said[-3000:]
