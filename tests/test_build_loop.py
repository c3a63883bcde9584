"""The build loop in process: the use case `image` runs (lock, plan, layers written into the store,
the config, the load, the checks, the memo) against an engine in memory (tests/helpers/memengine.py),
with no Docker engine, registry or network. What the Docker tests assert of an image enginebuild
writes itself (files and its manifest over scratch), asserted here in a fraction of their time:
the same inputs give the same image ID from an empty store, an edit moves only its layer, a build
with nothing changed loads nothing, and the one decision answers from what the build recorded."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from enginebuild.oci.engine import holds
from enginebuild.state.decision import FILES_EDITED, UP_TO_DATE, decide
from enginebuild.state.memo import PlanMemo, RunOptions
from enginebuild.usecases.building import build_image
from enginebuild.usecases.buildrequest import BuildRequest
from enginebuild.usecases.locking import lock_first
from enginebuild.workspace import Workspace
from helpers.memengine import MemoryEngine
from helpers.specs import FILES_ONLY_FILES as FILES
from helpers.specs import FILES_ONLY_SPEC as SPEC
from helpers.specs import write_image


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "repo"
    (root / "lockfiles").mkdir(parents=True)
    write_image(root, "inproc", SPEC, FILES)
    settle(root)
    monkeypatch.setenv("ENGINEBUILD_HOME", str(tmp_path / "home"))
    return root


def settle(root: Path) -> None:
    """Every file as if written a minute ago: a time stamp of the last seconds is not trusted by the memo."""
    past = time.time() - 60
    for path in [root, *root.rglob("*")]:
        os.utime(path, (past, past), follow_symlinks=False)


def build(root: Path, engine: MemoryEngine) -> Workspace:
    ws = Workspace(root, docker=engine)
    lock_first(ws, ["inproc"], False)
    build_image(ws, "inproc", BuildRequest(), ws.plan_options())
    return ws


def test_an_image_is_built_loaded_and_checked_in_process(repo):
    engine = MemoryEngine()
    build(repo, engine)
    image = engine.inspect("enginebuild/inproc:latest")
    assert image is not None and engine.image_id("enginebuild/inproc:latest-amd64") == image["Id"]
    assert image["Config"]["Entrypoint"] == ["/opt/app/run.sh"]
    assert "APP_HOME=/opt/app" in image["Config"]["Env"]
    assert image["Config"]["Labels"]["org.example.recipe"] == "fast-edit"
    files = engine.files("enginebuild/inproc:latest")
    assert files["opt/app/run.sh"] == FILES["run.sh"].encode()
    assert files["opt/app/bin/a.sh"] == FILES["scripts/a.sh"].encode() and "etc/app/engine.json" in files
    assert json.loads(files["opt/enginebuild/manifest.json"])["image"] == "inproc"


def test_the_same_inputs_give_the_same_image_id_from_an_empty_store(repo, tmp_path, monkeypatch):
    first = MemoryEngine()
    build(repo, first)
    monkeypatch.setenv("ENGINEBUILD_HOME", str(tmp_path / "another-home"))
    second = MemoryEngine()
    build(repo, second)
    assert first.image_id("enginebuild/inproc:latest") == second.image_id("enginebuild/inproc:latest")


def test_an_edit_moves_its_layer_only(repo):
    engine = MemoryEngine()
    build(repo, engine)
    before = engine.inspect("enginebuild/inproc:latest")["RootFS"]["Layers"]
    sent = len(engine.sent)
    (repo / "images/inproc/scripts/b.sh").write_text("#!/bin/sh\necho b2\n")
    build(repo, engine)
    after = engine.inspect("enginebuild/inproc:latest")["RootFS"]["Layers"]
    assert len(after) == len(before) and sum(a != b for a, b in zip(before, after, strict=True)) == 1
    changed = next(i for i, (a, b) in enumerate(zip(after, before, strict=True)) if a != b)
    assert after[changed] in engine.sent[sent:]  # the new layer reached the engine in the load
    assert engine.files("enginebuild/inproc:latest")["opt/app/bin/b.sh"] == b"#!/bin/sh\necho b2\n"


def test_nothing_changed_loads_nothing_and_the_decision_says_up_to_date(repo):
    engine = MemoryEngine()
    build(repo, engine)
    settle(repo)  # the lock the first build wrote, aged as a later run finds it
    loads = engine.loads
    ws = build(repo, engine)
    assert engine.loads == loads
    key = RunOptions().key(ws.root, "inproc")
    held = holds(engine)
    found = decide(PlanMemo(ws.home), key, held)
    assert found.answer == UP_TO_DATE, found.declined
    script = repo / "images/inproc/run.sh"
    script.write_text("#!/bin/sh\nexec serve --edited\n")
    past = time.time() - 60
    os.utime(script, (past, past))
    decision = decide(PlanMemo(ws.home), key, held)
    assert decision.answer == FILES_EDITED and decision.describe() == "files edited: run.sh"
    engine.remove("enginebuild/inproc:latest-amd64")  # the engine lost a tag: the record no longer holds
    assert decide(PlanMemo(ws.home), key, held).declined.startswith("the engine does not hold enginebuild/inproc")


def test_the_built_image_is_pushed_as_the_engine_holds_it_and_a_second_push_sends_nothing(repo):
    import gzip
    import hashlib

    from enginebuild.oci.reference import parse_image_ref
    from enginebuild.usecases.pushing import push_image
    from helpers.memregistry import MemoryRegistry

    engine, registry = MemoryEngine(), MemoryRegistry()
    ws = build(repo, engine)
    ws.registries = registry
    (record,) = push_image(ws, "inproc", "registry.example/acme/inproc", ["1"])
    assert record["layers_pushed"] == len(engine.inspect("enginebuild/inproc:latest")["RootFS"]["Layers"])
    digest, media_type, body = registry.manifest(parse_image_ref("registry.example/acme/inproc:1"))
    assert digest == record["digest"]
    manifest = json.loads(body)  # one platform: its manifest (an index lists several)
    assert media_type == "application/vnd.oci.image.manifest.v1+json" and "layers" in manifest, manifest
    config = registry.blobs[manifest["config"]["digest"]]
    # the pushed config is the image the engine was loaded with: the same ID, the same layers
    assert "sha256:" + hashlib.sha256(config).hexdigest() == engine.image_id("enginebuild/inproc:latest")
    diff_ids = json.loads(config)["rootfs"]["diff_ids"]
    for layer, diff_id in zip(manifest["layers"], diff_ids, strict=True):
        tar = gzip.decompress(registry.blobs[layer["digest"]])
        assert "sha256:" + hashlib.sha256(tar).hexdigest() == diff_id
    # its SBOM and provenance, attached by the referrers tag scheme
    attached = registry.tags["acme/inproc"][digest.replace(":", "-")]
    listed = json.loads(registry.manifests["acme/inproc"][attached][1])["manifests"]
    assert {m["artifactType"] for m in listed} >= {"application/vnd.cyclonedx+json"}, listed
    uploads = registry.uploads
    (again,) = push_image(ws, "inproc", "registry.example/acme/inproc", ["2"])
    assert again["digest"] == digest and again["layers_pushed"] == 0
    assert registry.uploads == uploads  # nothing uploaded twice
