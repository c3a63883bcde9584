"""Lockfiles and push records are replaced atomically under a file lock.

Faults are injected at named points (ENGINEBUILD_FAULT, see io/faults.py), so every run kills
at the same place on any machine: half-way through writing the new file, just before the
rename, after the blobs are uploaded, after the registry confirmed the tag. A further series
kills at fixed fractions of a measured run. After each kill every file is the old one or the
new one, never torn; no lock is held; the next run sweeps the killed run's temporaries.
"""
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT, run_cli
from helpers import report
from helpers.registry import push_blob_image
from helpers.specs import write_image

LOCK_POINTS = ["files.half-written:t.lock", "files.before-rename:t.lock"]
PUSH_POINTS = ["push.uploaded", "push.confirmed", "files.half-written:demo.pushes.json",
               "files.before-rename:demo.pushes.json"]
ROUNDS = 3
FRACTIONS = [i / 10 for i in range(1, 10)]


def start(args, cwd, fault: str | None = None, **kwargs):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    if fault:
        env["ENGINEBUILD_FAULT"] = fault
    return subprocess.Popen([sys.executable, "-m", "enginebuild", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def dotfiles(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def lock_tag(lockfile) -> str:
    doc = json.loads(lockfile.read_text())
    assert doc["image"] == "t"
    return doc["inputs"]["runtime.base@linux/amd64"]["request"]["ref"].rsplit(":", 1)[1]


@pytest.fixture
def moving_base(workspace, registry):
    repository = f"enginebuild-test/atomic-base-{uuid.uuid4().hex[:6]}"
    for tag in ("a", "b", "c"):
        push_blob_image(registry.host, repository, tag, salt=tag)

    def write(tag):
        write_image(workspace, "t", f"base: {registry.host}/{repository}:{tag}\nplatform: linux/amd64\n")
    return write


@pytest.mark.registry
def test_a_lock_killed_at_each_named_point_leaves_the_old_lockfile_and_the_next_run_cleans_up(workspace,
                                                                                               moving_base):
    lockfile = workspace / "lockfiles/t.lock"
    moving_base("a")
    assert run_cli(["lock", "t"], workspace).returncode == 0
    kills = 0
    for _round in range(ROUNDS):
        for point, tag in zip(LOCK_POINTS, ("b", "c"), strict=False):
            old = lockfile.read_bytes()
            moving_base(tag)
            proc = start(["lock", "t"], workspace, fault=f"{point}=kill")
            proc.communicate(timeout=120)
            assert proc.returncode == -signal.SIGKILL, (point, proc.returncode)
            kills += 1
            assert lockfile.read_bytes() == old, point  # the old lock, whole
            left = dotfiles(lockfile.parent)
            assert len(left) == 1 and f".{proc.pid}." in left[0], left  # the killed run's temporary
            again = run_cli(["lock", "t"], workspace, timeout=120)
            assert again.returncode == 0, again.stderr
            assert "waiting for another" not in again.stderr  # the kernel released the killed holder's lock
            assert lock_tag(lockfile) == tag  # the next run wrote the new lock
            assert dotfiles(lockfile.parent) == []  # and swept the temporary
            moving_base("a")
            assert run_cli(["lock", "t"], workspace).returncode == 0
    report.count("atomic state", "lock runs killed at named points", kills)
    assert kills == ROUNDS * len(LOCK_POINTS)


@pytest.mark.registry
def test_a_lock_killed_at_fractions_of_a_measured_run_never_tears_the_lockfile(workspace, moving_base):
    lockfile = workspace / "lockfiles/t.lock"
    moving_base("a")
    began = time.monotonic()
    assert run_cli(["lock", "t"], workspace).returncode == 0
    measured = time.monotonic() - began
    tags = {"a"}
    for n, fraction in enumerate(FRACTIONS):
        tag = "bc"[n % 2]
        moving_base(tag)
        proc = start(["lock", "t"], workspace)
        try:
            proc.wait(timeout=measured * fraction)
        except subprocess.TimeoutExpired:
            proc.kill()
        proc.communicate()
        tags.add(lock_tag(lockfile))  # parses: old or new, never torn
    again = run_cli(["lock", "t"], workspace)
    assert again.returncode == 0 and "waiting for another" not in again.stderr
    assert dotfiles(lockfile.parent) == []
    report.count("atomic state", "lock runs killed at fractions of a measured run", len(FRACTIONS))


def test_sigterm_while_writing_a_lockfile_removes_the_temporary_and_exits_143(workspace, moving_base, eb_home):
    lockfile = workspace / "lockfiles/t.lock"
    moving_base("a")
    assert run_cli(["lock", "t"], workspace).returncode == 0
    old = lockfile.read_bytes()
    moving_base("b")
    announced = eb_home / "faults" / "files.half-written"
    announced.unlink(missing_ok=True)
    proc = start(["lock", "t"], workspace, fault="files.half-written:t.lock=stall")
    deadline = time.monotonic() + 120
    while not announced.exists():  # the run is stalled half-way through writing the new lock
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    assert len(dotfiles(lockfile.parent)) == 1
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert "terminated" in stderr and "Traceback" not in stderr
    assert lockfile.read_bytes() == old and dotfiles(lockfile.parent) == []


def served(host, repository, tag):
    import requests

    return requests.head(f"http://{host}/v2/{repository}/manifests/{tag}", timeout=30,
                         headers={"Accept": "application/vnd.oci.image.index.v1+json, "
                                            "application/vnd.oci.image.manifest.v1+json, "
                                            "application/vnd.docker.distribution.manifest.v2+json"})


def check_records(records, host, repository) -> int:
    """Every recorded push is served by the registry under its digest; returns how many records."""
    doc = json.loads(records.read_text())
    for record in doc["pushes"]:
        head = served(host, repository, record["tag"])
        assert head.status_code == 200 and head.headers["Docker-Content-Digest"] == record["digest"], record
    return len(doc["pushes"])


@pytest.mark.docker
@pytest.mark.registry
def test_a_push_killed_at_each_named_point_never_records_a_push_that_did_not_happen(workspace, registry,
                                                                                    docker_engine,
                                                                                    debian_reachable):
    assert run_cli(["image", "demo"], workspace).returncode == 0
    repository = f"enginebuild-test/killed-push-{uuid.uuid4().hex[:6]}"
    target = f"{registry.host}/{repository}"
    assert run_cli(["push", "demo", "--to", target, "--tag", "warm"], workspace).returncode == 0
    records = workspace / "lockfiles/demo.pushes.json"
    kills = 0
    for round_ in range(ROUNDS):
        for point in PUSH_POINTS:
            before = records.read_bytes()
            tag = f"k{round_}-{point.replace(':', '-')}"
            proc = start(["push", "demo", "--to", target, "--tag", tag], workspace, fault=f"{point}=kill")
            proc.communicate(timeout=300)
            assert proc.returncode == -signal.SIGKILL, (point, proc.returncode)
            kills += 1
            assert records.read_bytes() == before, point  # no record of the killed push
            check_records(records, registry.host, repository)
            if point == "push.uploaded":
                assert served(registry.host, repository, tag).status_code == 404
            else:  # the registry has it; the record does not claim it: a later push records it
                assert served(registry.host, repository, tag).status_code == 200
    again = run_cli(["push", "demo", "--to", target, "--tag", "after"], workspace)
    assert again.returncode == 0, again.stderr
    assert dotfiles(records.parent) == []
    assert check_records(records, registry.host, repository) == 2
    report.count("atomic state", "push runs killed at named points", kills)
    assert kills == ROUNDS * len(PUSH_POINTS)


@pytest.mark.docker
@pytest.mark.registry
def test_a_push_killed_at_fractions_of_a_measured_run_records_only_pushes_that_happened(workspace, registry,
                                                                                       docker_engine,
                                                                                       debian_reachable):
    assert run_cli(["image", "demo"], workspace).returncode == 0
    repository = f"enginebuild-test/timed-push-{uuid.uuid4().hex[:6]}"
    target = f"{registry.host}/{repository}"
    records = workspace / "lockfiles/demo.pushes.json"
    began = time.monotonic()
    assert run_cli(["push", "demo", "--to", target, "--tag", "measured"], workspace).returncode == 0
    measured = time.monotonic() - began
    for n, fraction in enumerate(FRACTIONS):
        proc = start(["push", "demo", "--to", target, "--tag", f"f{n}"], workspace)
        try:
            proc.wait(timeout=measured * fraction)
        except subprocess.TimeoutExpired:
            proc.kill()
        proc.communicate()
        check_records(records, registry.host, repository)
    report.count("atomic state", "push runs killed at fractions of a measured run", len(FRACTIONS))


def test_concurrent_runs_on_one_checkout_wait_for_each_other_visibly(workspace):
    holder = workspace / ".enginebuild" / "lock"
    holder.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(holder, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    proc = start(["lock", "demo"], workspace)
    stderr = ""
    deadline = time.monotonic() + 120
    while "waiting for another" not in stderr:  # the state: it says it waits
        assert proc.poll() is None and time.monotonic() < deadline
        stderr += proc.stderr.readline()
    assert proc.poll() is None  # still waiting
    os.close(fd)  # release
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr + rest
    assert "waiting for another enginebuild process that holds the lock on this checkout's lockfiles" in stderr
