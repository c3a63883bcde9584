"""Upstream and store integrity: pins hold when upstream moves; every kind of file enginebuild
keeps in its store is re-hashed before use, and a damaged one (a flipped byte, a truncation)
is named, deleted and fetched or made again; an engine that stops mid-build records nothing
and the next run resumes from what was built."""
import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT, need, run_cli
from enginebuild.io.store import Store, sha256_file
from enginebuild.layerkinds.commands import Run
from enginebuild.lock.lockfile import read_lock
from enginebuild.plan.image import Options, plan_image
from enginebuild.plan.stored import layer_blobs, record_key
from enginebuild.recipe.catalog import Catalog
from helpers import report
from helpers.docker import docker
from helpers.engines import start_engine
from helpers.registry import push_files_image
from helpers.specs import BUSYBOX_BUILDER, write_image

TURBOQUANT_SDIST_SHA256 = "5aabf0fc271db6494b85bbc24080835ddd71492966743713d0b912179b02a04d"
WARNING = "hashes to"


def flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.chmod(0o644)
    path.write_bytes(bytes(data))


def truncate(path):
    path.chmod(0o644)
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


DAMAGES = {"flip": flip, "truncate": truncate}


@pytest.mark.docker
@pytest.mark.registry
def test_a_base_whose_tag_moved_after_locking_is_built_from_the_locked_digest(workspace, registry, docker_engine):
    repository = f"enginebuild-test/moving-base-{uuid.uuid4().hex[:6]}"
    push_files_image(registry.host, repository, "stable", {"etc/flavour": b"first\n"})
    write_image(workspace, "app", f"base: {registry.host}/{repository}:stable\nplatform: linux/amd64\n"
                                  "files:\n  /etc/note: note\n", {"note": "hello\n"})
    assert run_cli(["lock", "app"], workspace).returncode == 0
    push_files_image(registry.host, repository, "stable", {"etc/flavour": b"second\n"})  # upstream moves the tag
    proc = run_cli(["image", "app"], workspace)
    assert proc.returncode == 0, proc.stderr
    saved = docker("create", "enginebuild/app:latest", "x").stdout.strip()
    try:
        flavour = docker("cp", f"{saved}:/etc/flavour", "-").stdout
    finally:
        docker("rm", saved)
    report.count("upstream integrity", "moved tags built from the locked digest", int("first" in flavour))
    assert "first" in flavour and "second" not in flavour
    assert run_cli(["lock", "--check", "app"], workspace).returncode == 0  # the lock is still what the spec asks


def pinned_files(workspace):
    lock = json.loads((workspace / "lockfiles/demo.lock").read_text())["inputs"]
    deb = lock["runtime.system@linux/amd64"]["resolved"]["packages"][0]
    wheel = lock["runtime.python@linux/amd64"]["resolved"]["packages"][0]
    return {"deb": (deb["sha256"], f"{deb['name']} {deb['version']}"), "wheel": (wheel["sha256"], wheel["filename"])}


@pytest.mark.docker
@pytest.mark.network
@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("kind", ["deb", "wheel"])
def test_a_damaged_download_in_the_store_is_refused_deleted_and_fetched_again(workspace, eb_home, kind, damage,
                                                                               debian_reachable, pypi_reachable):
    assert run_cli(["fetch", "demo"], workspace).returncode == 0
    sha, name = pinned_files(workspace)[kind]
    stored = Store(eb_home).path(sha)
    DAMAGES[damage](stored)
    proc = run_cli(["fetch", "demo"], workspace)
    assert proc.returncode == 0, proc.stderr
    warning = next(line for line in proc.stderr.splitlines() if "warning:" in line)
    assert name in warning and f"the stored file {stored} {WARNING}" in warning and "deleted it" in warning
    assert sha256_file(stored) == sha
    report.count("store integrity", f"damaged downloads refused and fetched again ({kind}, {damage})")


@pytest.mark.network
@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_sdist_in_the_store_is_refused_deleted_and_fetched_again(workspace, eb_home, damage,
                                                                           pypi_reachable, debian_reachable):
    write_image(workspace, "t", """
        base: scratch
        platform: linux/amd64
        builder:
          base: scratch
          system: {install: extract, packages: [busybox-static]}
        components:
          e:
            source: {pypi: {name: turboquant, version: 0.2.0}}
            build: {script: build.sh}
            outputs: {paths: [/x]}
        install: [e]
        """, {"build.sh": "#!/bin/sh\ntrue\n"})
    assert run_cli(["lock", "t"], workspace).returncode == 0
    assert run_cli(["fetch", "t"], workspace).returncode == 0
    stored = Store(eb_home).path(TURBOQUANT_SDIST_SHA256)
    DAMAGES[damage](stored)
    proc = run_cli(["fetch", "t"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert f"warning: turboquant-0.2.0.tar.gz: the stored file {stored} {WARNING}" in proc.stderr
    assert sha256_file(stored) == TURBOQUANT_SDIST_SHA256
    report.count("store integrity", f"damaged downloads refused and fetched again (sdist, {damage})")


def demo_plan(workspace):
    spec = Catalog(workspace).load("demo")
    return plan_image(spec, read_lock(workspace, spec), "linux/amd64", Options())


def forget_image(plan):
    """Untag the demo and every chain image, so that the next build must load every layer it
    wrote from the store (the engine would otherwise not need them)."""
    tags = docker("images", "--format", "{{.Repository}}:{{.Tag}}", "enginebuild/chain").stdout.split()
    docker("rmi", "--no-prune", "enginebuild/demo:latest", *tags, check=False)


def stored_layer(eb_home, plan, by_command):
    store = Store(eb_home)
    for node in plan.runtime.layers:
        if isinstance(node.payload, Run) == by_command:
            return store.path(layer_blobs(store, node)[-1][0]), node.name
    raise AssertionError(f"no layer made by {'a command' if by_command else 'enginebuild'}")


@pytest.mark.docker
@pytest.mark.network
@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("kind", ["component outputs", "written layer", "command layer", "patched tree",
                                  "layer record"])
def test_a_damaged_file_made_by_a_build_is_named_deleted_and_made_again(workspace, eb_home, docker_engine, kind,
                                                                        damage, debian_reachable):
    first = run_cli(["image", "demo"], workspace)
    assert first.returncode == 0, first.stderr
    before = docker_engine.image_id("enginebuild/demo:latest")
    plan = demo_plan(workspace)
    store = Store(eb_home)
    args = ["image", "demo"]
    engine = next(c for c in plan.components if c.name == "engine")
    if kind == "component outputs":
        path, name = store.path(store.record("outputs", engine.key)["sha256"]), "outputs of engine"
    elif kind == "written layer":
        path, name = stored_layer(eb_home, plan, False)
    elif kind == "command layer":
        path, name = stored_layer(eb_home, plan, True)
    elif kind == "layer record":
        path, name = store.records / "layers" / f"{record_key(plan.runtime.layers[-1])}.json", "record"
    else:  # the engine's patched source tree, used when the component builds again
        from enginebuild.layerkinds.context import FromSource

        tree = next(item for item in engine.context if isinstance(item.origin, FromSource))
        record = store.record("patched", tree.digest)  # this plan's tree (the shared store holds others)
        path, name = store.path(record["sha256"]), "patched tree of engine"
        args += ["--build-arg", f"CFLAGS=-O2 -DRUN_{uuid.uuid4().hex[:8]}"]
    DAMAGES[damage](path)
    forget_image(plan)
    proc = run_cli(args, workspace)
    assert proc.returncode == 0, proc.stderr
    if name == "record":
        assert f"warning: the record {path} is damaged; deleted it" in proc.stderr, proc.stderr
    else:
        assert f"{name}: the stored file" in proc.stderr and "deleted it" in proc.stderr, proc.stderr
    if kind != "patched tree":  # the same inputs make the same image, bit for bit
        assert docker_engine.image_id("enginebuild/demo:latest") == before
    assert run_cli(["image", "demo"], workspace).stderr.count("warning") == 0
    report.count("store integrity", f"damaged build products named and made again ({kind}, {damage})")


HANGING = BUSYBOX_BUILDER + """components:
  first:
    source: {path: first}
    build: {script: first/build.sh}
    outputs: {paths: [/out/first]}
  slow:
    source: {path: slow}
    needs: [first]
    build:
      script: slow/build.sh
      args: {MODE: hang}
    outputs: {paths: [/out/slow]}
install: [slow]
"""


def hanging_files() -> dict:
    """With MODE=hang the slow build never ends, so a test certainly acts while it runs (with
    MODE=short its step is a `sleep 7` a test can watch); a fresh salt keeps any earlier build
    of it out of BuildKit's cache."""
    return {
        "first/build.sh": "#!/bin/sh\nset -e\nmkdir -p /out && echo first > /out/first\n",
        "slow/build.sh": '#!/bin/sh\nset -e\nif [ "$MODE" = hang ]; then exec sleep 3600; fi\n'
                         # a shell named after this build's salt around the sleep: a test finds this
                         # build's step, and no other process of the machine
                         'if [ "$MODE" = short ]; then sh -c "sleep 7; true" "sleeper-$(cat salt)"; fi\n'
                         'mkdir -p /out && echo slow > /out/slow\n',
        "slow/salt": uuid.uuid4().hex,
    }


@pytest.mark.docker
@pytest.mark.network
def test_an_engine_that_stops_mid_build_records_nothing_and_the_next_run_resumes(workspace, docker_engine, tmp_path,
                                                                                  debian_reachable):
    need(os.geteuid() == 0 and shutil.which("dockerd") is not None, "a second Docker engine needs root and dockerd")
    write_image(workspace, "hang", HANGING, hanging_files())
    assert run_cli(["lock", "hang"], workspace).returncode == 0
    folder = tmp_path / "engine"
    engine = start_engine(folder, index=5)
    home = tmp_path / "home"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), DOCKER_HOST=engine.host, ENGINEBUILD_HOME=str(home),
               ENGINEBUILD_FAULT="buildkit.running:component slow=announce")
    proc = subprocess.Popen([sys.executable, "-m", "enginebuild", "image", "hang"], cwd=workspace, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    announced = home / "faults" / "buildkit.running"
    try:
        deadline = time.monotonic() + 900
        while not announced.exists():  # the state: the slow component's build is running
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        engine.stop(keep_data=True)  # the engine goes away mid-build
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    report.count("engine faults", "engine stopped mid-build")
    assert proc.returncode == 1, stderr
    assert "the Docker engine at unix://" in stderr
    assert "stopped answering while [linux/amd64] component slow was building" in stderr, stderr
    assert "Traceback" not in stderr
    store = Store(home)
    spec = Catalog(workspace).load("hang")
    plan = plan_image(spec, read_lock(workspace, spec), "linux/amd64", Options())
    keys = {c.name: c.key for c in plan.components}
    assert store.record("outputs", keys["first"]) is not None  # built before the engine went away
    assert store.record("outputs", keys["slow"]) is None  # nothing recorded for the build that failed
    engine = start_engine(folder, index=5)
    try:
        env["DOCKER_HOST"] = engine.host
        del env["ENGINEBUILD_FAULT"]
        again = subprocess.run([sys.executable, "-m", "enginebuild", "image", "hang", "--build-arg", "MODE=go"],
                               cwd=workspace, env=env, capture_output=True, text=True, timeout=900)
        assert again.returncode == 0, again.stderr
        assert "built 1 component(s) (slow)" in again.stdout  # first is reused, and the builder's layers
        assert "system commands: built" not in again.stderr
        report.count("engine faults", "resumed from the components already built")
    finally:
        engine.stop()


@pytest.mark.docker
@pytest.mark.network
@pytest.mark.registry
@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_layer_is_made_again_even_while_the_engine_holds_the_image(workspace, eb_home, docker_engine,
                                                                             registry, damage, debian_reachable):
    assert run_cli(["image", "demo"], workspace).returncode == 0
    before = docker_engine.image_id("enginebuild/demo:latest")
    plan = demo_plan(workspace)
    path, name = stored_layer(eb_home, plan, False)
    sha = path.name
    DAMAGES[damage](path)
    proc = run_cli(["image", "demo"], workspace)  # the no-op memo does not answer for a damaged store
    assert proc.returncode == 0, proc.stderr
    assert f"{name}: the stored file" in proc.stderr and "deleted it" in proc.stderr, proc.stderr
    assert sha256_file(path) == sha and docker_engine.image_id("enginebuild/demo:latest") == before
    DAMAGES[damage](path)
    pushed = run_cli(["push", "demo", "--platform", "linux/amd64", "--to", f"{registry.host}/enginebuild-test/damaged"],
                     workspace)
    assert pushed.returncode == 0, pushed.stderr
    assert "damaged in the store; making it again" in pushed.stderr
    assert sha256_file(path) == sha
    report.count("store integrity", f"damaged layers made again with the image still in the engine ({damage})")


@pytest.mark.network
def test_an_extracted_source_file_edited_in_the_store_is_taken_from_the_archive_again(tmp_path, pypi_reachable,
                                                                                       capfd):
    from enginebuild.io.http import Http
    from enginebuild.io.progress import configure
    from enginebuild.sources.base import Context
    from enginebuild.sources.pypi import KIND, PypiRequest

    configure()  # warnings go to this test's stderr (an earlier test in this process may have made the output)
    request = PypiRequest("turboquant", "0.2.0", "https://pypi.org/simple")
    ctx = Context(tmp_path, Http())
    pin = KIND.resolve(request, ctx)
    wanted = "turboquant/__init__.py"
    first = KIND.tree(request, pin, ctx).read_many([wanted])[wanted]
    extracted = next((tmp_path / "trees").glob(f"*/files/{wanted}"))
    extracted.write_bytes(first + b"\nLEAKED = 'edited in the store'\n")  # what a patch would then apply to
    again = KIND.tree(request, pin, ctx).read_many([wanted])[wanted]
    assert again == first
    assert "was changed after extraction; taking it from the archive again" in capfd.readouterr().err
    assert extracted.read_bytes() == first
    report.count("store integrity", "edited source trees taken from the archive again")


@pytest.mark.docker
@pytest.mark.network
@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_unpacked_cuobjdump_is_unpacked_again(workspace, eb_home, docker_engine, damage,
                                                        debian_reachable, pypi_reachable):
    assert run_cli(["image", "demo"], workspace).returncode == 0
    assert run_cli(["verify", "demo"], workspace).returncode == 0
    binary = next((eb_home / "tools").glob("*/cuobjdump"))
    recorded = sha256_file(binary)
    DAMAGES[damage](binary)
    proc = run_cli(["verify", "demo"], workspace)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "does not hash to the wheel's record of it; unpacking it again" in proc.stderr
    assert sha256_file(binary) == recorded
    report.count("store integrity", f"damaged tools unpacked again ({damage})")
