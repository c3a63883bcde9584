"""Lockfiles and push records are replaced atomically under a file lock: SIGKILL at random points
leaves every file old or new, never torn, and no lock held; concurrent runs wait, visibly."""
import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid

import pytest
from conftest import ROOT, run_cli
from helpers import report
from helpers.gitrepo import Repo
from helpers.registry import push_blob_image
from helpers.specs import write_image

LOCK_KILLS = 100
PUSH_KILLS = int(os.environ.get('ENGINEBUILD_TEST_PUSH_KILLS', '40'))


def start(args, cwd, env=None):
    full = dict(os.environ, PYTHONPATH=str(ROOT / "src"), **(env or {}))
    return subprocess.Popen([sys.executable, "-m", "enginebuild", *args], cwd=cwd, env=full,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kill_at_random(proc, upto: float, rng) -> bool:
    """SIGKILL after a random delay; False if it finished first."""
    deadline = time.monotonic() + rng.uniform(0, upto)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        time.sleep(0.001)
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return True


@pytest.mark.registry
def test_killing_lock_at_random_points_never_tears_a_lockfile(workspace, registry, tmp_path, git_available):
    repo = Repo(tmp_path / "upstream")
    for n in range(3):
        repo.commit({"engine.c": f"int v = {n};\n"}, f"v{n}", tag=f"v{n}")
    push_blob_image(registry.host, "enginebuild-test/atomic-base", "1")
    spec = ("base: {host}/enginebuild-test/atomic-base:1\nplatform: linux/amd64\n"
            "engine:\n  name: e\n  source:\n    git: {{url: '{url}', ref: {ref}}}\n")
    lockfile = workspace / "lockfiles/t.lock"
    rng = random.Random(20261121)
    seen, kills, torn = set(), 0, 0
    for i in range(LOCK_KILLS * 3):
        write_image(workspace, "t", spec.format(host=registry.host, url=repo.url, ref=f"v{i % 3}"))
        before = lockfile.read_bytes() if lockfile.exists() else None
        proc = start(["lock", "t"], workspace)
        if kill_at_random(proc, 0.6, rng):
            kills += 1
        after = lockfile.read_bytes() if lockfile.exists() else None
        if after is not None:
            try:
                doc = json.loads(after)
                assert doc["image"] == "t"
            except (ValueError, KeyError):
                torn += 1
        if after not in (before, None):
            seen.add(json.loads(after)["inputs"]["engine"]["request"]["ref"])
        leftovers = [p.name for p in lockfile.parent.iterdir() if p.name.startswith(".")]
        if kills >= LOCK_KILLS:
            break
    report.count("atomic state", "kills during lock", kills)
    report.count("atomic state", "torn files", torn)
    assert kills >= LOCK_KILLS and torn == 0
    assert len(seen) >= 2  # runs that finished did write new locks
    # a killed writer leaves no lock held and no temporary file behind the next run
    proc = run_cli(["lock", "t"], workspace, timeout=60)
    assert proc.returncode == 0 and "waiting for another" not in proc.stderr
    assert [p.name for p in lockfile.parent.iterdir() if p.name.startswith(".")] == []
    assert leftovers is not None


def served(host, tag):
    import requests

    return requests.head(f"http://{host}/v2/enginebuild-test/killed-push/manifests/{tag}", timeout=30,
                         headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})


@pytest.mark.docker
@pytest.mark.registry
def test_killing_push_never_records_a_push_that_did_not_happen(workspace, registry, docker_engine, debian_reachable):
    assert run_cli(["image", "demo"], workspace).returncode == 0
    repo = f"{registry.host}/enginebuild-test/killed-push"
    assert run_cli(["push", "demo", "--to", repo, "--tag", "warm"], workspace).returncode == 0
    records = workspace / "lockfiles/demo.pushes.json"
    rng = random.Random(7)
    kills = torn = wrong = 0
    mismatches = []
    for i in range(PUSH_KILLS * 3):
        tag = f"k{i}-{uuid.uuid4().hex[:6]}"
        proc = start(["push", "demo", "--to", repo, "--tag", tag], workspace)
        if kill_at_random(proc, 1.5, rng):
            kills += 1
        try:
            doc = json.loads(records.read_text())
        except ValueError:
            torn += 1
            continue
        for record in doc["pushes"]:
            head = served(registry.host, record["tag"])
            if head.headers.get("Docker-Content-Digest") != record["digest"]:
                time.sleep(0.5)  # ask once more: a registry busy with a killed client's upload can answer late
                head = served(registry.host, record["tag"])
            if head.headers.get("Docker-Content-Digest") != record["digest"]:
                wrong += 1
                mismatches.append((record, head.status_code, dict(head.headers)))
        if kills >= PUSH_KILLS:
            break
    report.count("atomic state", "kills during push", kills)
    report.count("atomic state", "torn files", torn)
    report.count("atomic state", "records of pushes that did not happen", wrong)
    assert kills >= PUSH_KILLS and torn == 0 and wrong == 0, mismatches


def test_concurrent_runs_on_one_checkout_wait_for_each_other_visibly(workspace):
    holder = workspace / ".enginebuild" / "lock"
    holder.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(holder, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    proc = subprocess.Popen([sys.executable, "-m", "enginebuild", "lock", "demo"], cwd=workspace,
                            env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    assert proc.poll() is None  # still waiting
    os.close(fd)  # release
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert "waiting for another enginebuild process that holds the lock on this checkout's lockfiles" in stderr
