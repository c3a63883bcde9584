"""`gc` removes what no image needs (stored blobs and records, the engine's chain and component
tags) and keeps what the catalogue's current plans and each image's last build reach: after it,
the image is still a no-op, and `--dry-run` removes nothing."""
from __future__ import annotations

import json
import uuid

import pytest

from conftest import ROOT
from helpers.docker import docker
from helpers.inprocess import run_in_process
from helpers.specs import BUSYBOX_BUILDER, write_image

pytestmark = [pytest.mark.docker, pytest.mark.network]

SPEC = BUSYBOX_BUILDER + """components:
  e:
    source: {path: src}
    build: {script: build.sh}
    outputs: {paths: [/opt/e]}
install: [e]
files:
  /opt/app/run.sh: run.sh
entrypoint: [/opt/app/run.sh]
"""


def chain_tags() -> set[str]:
    out = docker("images", "--format", "{{.Repository}}:{{.Tag}}", "enginebuild/chain").stdout.split()
    out += docker("images", "--format", "{{.Repository}}:{{.Tag}}", "enginebuild/component").stdout.split()
    return set(out)


def test_gc_removes_what_no_image_needs_and_the_image_stays_a_no_op(tmp_path, docker_engine, debian_reachable,
                                                                    registry):
    ws = tmp_path / "repo"
    (ws / "lockfiles").mkdir(parents=True)
    name = f"gc-{uuid.uuid4().hex[:6]}"
    env = {"ENGINEBUILD_HOME": str(tmp_path / "home")}
    files = {"src/x": "x\n", "build.sh": "#!/bin/sh\nmkdir -p /opt/e && echo MARK > /opt/e/x\n",
             "run.sh": "#!/bin/sh\necho one\n"}
    write_image(ws, name, SPEC, files)
    assert run_in_process(["lock", name], ws, env=env).returncode == 0
    cache = f"{registry.host}/enginebuild-test/gc-cache-{name}"
    assert run_in_process(["image", name, "--cache", cache], ws, env=env).returncode == 0
    first_tags = chain_tags()
    first_cached = set(registry_tags(registry.host, cache))
    write_image(ws, name, SPEC, {**files, "run.sh": "#!/bin/sh\necho two\n",
                                 "build.sh": "#!/bin/sh\nmkdir -p /opt/e && echo OTHER > /opt/e/x\n"})
    rebuilt = run_in_process(["image", name, "--cache", cache], ws, env=env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    image_id = json.loads(docker("image", "inspect", f"enginebuild/{name}:latest").stdout)[0]["Id"]

    dry = run_in_process(["gc", "--dry-run", "--json"], ws, env=env)
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert planned["blobs"] >= 2 and planned["blob_bytes"] > 0  # the old launcher's layer, the old outputs
    assert planned["records"] >= 1
    stale = set(planned["engine_tags"])
    assert stale and stale <= first_tags  # the first build's component image and chain tags
    assert json.loads(run_in_process(["gc", "--dry-run", "--json"], ws, env=env).stdout)["blobs"] == planned["blobs"]

    done = run_in_process(["gc"], ws, env=env)
    assert done.returncode == 0, done.stderr
    assert f"store: removed {planned['blobs']} blob(s)" in done.stdout, done.stdout
    assert not (stale & chain_tags())
    after = json.loads(run_in_process(["gc", "--dry-run", "--json"], ws, env=env).stdout)
    assert (after["blobs"], after["records"], after["engine_tags"]) == (0, 0, [])
    again = run_in_process(["image", name], ws, env=env)  # what the image needs was kept
    assert again.returncode == 0 and "nothing to build" in again.stdout, again.stdout + again.stderr
    assert json.loads(docker("image", "inspect", f"enginebuild/{name}:latest").stdout)[0]["Id"] == image_id
    doctor = json.loads(run_in_process(["doctor", "--json"], ws, env=env).stdout)
    store = next(c for c in doctor["checks"] if c["name"] == "store")
    assert f"{after['kept_blobs']} blob(s)" in store["detail"] and "`gc` removes" in store["detail"]
    # the registry cache, asked for: the first build's entries go, the current ones stay; a compiler
    # cache (cc-KEY) whose cache key no component has any more goes with them
    from helpers.cacheentry import put_entry

    put_entry(registry.host, cache.split("/", 1)[1], "cc-" + "c" * 64, "compiler-cache", {"tars": []}, [], key=None)
    first_cached.add("cc-" + "c" * 64)
    cached = set(registry_tags(registry.host, cache))
    stale_entries = json.loads(run_in_process(["gc", "--cache", cache, "--dry-run", "--json"], ws, env=env).stdout)
    assert stale_entries["cache_entries"] and set(stale_entries["cache_entries"]) <= first_cached
    assert "cc-" + "c" * 64 in stale_entries["cache_entries"]
    assert run_in_process(["gc", "--cache", cache], ws, env=env).returncode == 0
    assert set(registry_tags(registry.host, cache)) == cached - set(stale_entries["cache_entries"])
    assert "nothing to build" in run_in_process(["image", name, "--cache", cache], ws, env=env).stdout
    docker("image", "rm", f"enginebuild/{name}:latest", check=False)


def registry_tags(host: str, repository: str) -> list[str]:
    import requests

    answer = requests.get(f"http://{host}/v2/{repository.split('/', 1)[1]}/tags/list", timeout=30)
    return list(answer.json().get("tags") or []) if answer.status_code == 200 else []


def test_gc_on_a_shared_engine_leaves_the_tags_another_store_made(tmp_path, docker_engine, debian_reachable):
    """Two stores (two recipe repositories, two homes) on one engine: the first's gc removes only
    what it made, says whose tags it lists, and counts the other's; the second's image stays a
    no-op. With the engine out of reach, gc says it never looked at it."""
    stores, made = {}, {}
    for who, word in (("first", "one"), ("second", "two")):
        ws = tmp_path / who / "repo"
        (ws / "lockfiles").mkdir(parents=True)
        name = f"gc-{who}-{uuid.uuid4().hex[:6]}"
        env = {"ENGINEBUILD_HOME": str(tmp_path / who / "home")}
        write_image(ws, name, SPEC, {"src/x": f"{word}\n", "run.sh": f"#!/bin/sh\necho {word}\n",
                                     "build.sh": f"#!/bin/sh\nmkdir -p /opt/e && echo {word} > /opt/e/x\n"})
        assert run_in_process(["lock", name], ws, env=env).returncode == 0
        before = chain_tags()
        built = run_in_process(["image", name], ws, env=env)
        assert built.returncode == 0, built.stderr
        stores[who], made[who] = (ws, name, env), chain_tags() - before
    assert made["second"]  # its component image and chain tags, no other store's
    ws, name, env = stores["first"]
    (ws / "images" / name / "run.sh").write_text("#!/bin/sh\necho changed\n")  # its first chain: not needed
    (ws / "images" / name / "build.sh").write_text("#!/bin/sh\nmkdir -p /opt/e && echo changed > /opt/e/x\n")
    assert run_in_process(["image", name], ws, env=env).returncode == 0
    dry = run_in_process(["gc", "--dry-run"], ws, env=env)
    assert dry.returncode == 0, dry.stderr
    assert f"enginebuild tag(s) this store ({tmp_path / 'first' / 'home'}) made" in dry.stdout, dry.stdout
    assert "made by another store" in dry.stdout, dry.stdout
    listed = json.loads(run_in_process(["gc", "--dry-run", "--json"], ws, env=env).stdout)
    assert listed["engine_tags"] and set(listed["engine_tags"]) <= made["first"], listed
    assert made["second"] <= set(listed["engine_tags_of_others"]), listed
    assert run_in_process(["gc"], ws, env=env).returncode == 0
    assert made["second"] <= chain_tags() and not set(listed["engine_tags"]) & chain_tags()
    second_ws, second_name, second_env = stores["second"]
    mine = run_in_process(["image", second_name], second_ws, env=second_env)
    assert mine.returncode == 0 and "nothing to build" in mine.stdout, mine.stdout + mine.stderr
    away = run_in_process(["gc", "--dry-run"], ws, env={**env, "DOCKER_HOST": "unix:///nonexistent/engine.sock"})
    assert away.returncode == 0 and "engine: not reached (unix:///nonexistent/engine.sock)" in away.stdout, \
        away.stdout + away.stderr
    for who in stores.values():
        docker("image", "rm", f"enginebuild/{who[1]}:latest", check=False)


def test_gc_dry_run_waits_for_no_build_and_gc_says_it_waits_even_quiet(tmp_path, workspace):
    """A build holds the store (shared): `gc --dry-run` removes nothing and answers at once; `gc -q`
    waits for the build and says so on stderr (it once waited 630 s in silence)."""
    import fcntl
    import os
    import subprocess
    import sys
    import threading

    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "ENGINEBUILD_HOME": str(home), "DOCKER_HOST": "unix:///nonexistent/gc.sock",
           "PYTHONPATH": str(ROOT / "src")}
    build = os.open(home / "gc.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(build, fcntl.LOCK_SH)  # what a running build holds
    try:
        dry = subprocess.run([sys.executable, "-m", "enginebuild", "gc", "--dry-run"], cwd=workspace, env=env,
                             capture_output=True, text=True, timeout=300)
        assert dry.returncode == 0 and "store: would remove" in dry.stdout, dry.stdout + dry.stderr
        gc = subprocess.Popen([sys.executable, "-m", "enginebuild", "-q", "gc"], cwd=workspace, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        guard = threading.Timer(300, gc.kill)  # a gc that never says it waits fails here, not the whole run
        guard.start()
        first = gc.stderr.readline()  # blocks until gc says something: what it waits for
        guard.cancel()
        assert "waiting for another enginebuild process that holds the lock on the store (a build)" in first, first
    finally:
        os.close(build)  # the build ends
    out, err = gc.communicate(timeout=300)
    assert gc.returncode == 0, out + err
