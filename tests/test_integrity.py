"""Upstream integrity: pins hold even when upstream moves or a stored file changes; an engine
that stops mid-build records nothing and the next run resumes from the stages already built."""
import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from conftest import ROOT, need, run_cli
from helpers import report
from helpers.docker import docker
from helpers.engines import start_engine
from helpers.specs import write_image

from enginebuild.context import ContextItem
from enginebuild.errors import FetchError
from enginebuild.fetch import Fetcher
from enginebuild.lockfile import Lock
from enginebuild.store import Store

BUSYBOX = ["base: scratch", "platform: linux/amd64", "system:", "  install: extract", "  packages: [busybox-static]",
           "  run:", '    - ["/bin/busybox", "--install", "-s", "/bin"]', '    - "mkdir -p /tmp && chmod 1777 /tmp"']


@pytest.mark.docker
@pytest.mark.registry
@pytest.mark.network
def test_a_base_whose_tag_moved_after_locking_is_built_from_the_locked_digest(workspace, registry, docker_engine,
                                                                                debian_reachable):
    base = f"{registry.host}/enginebuild-test/moving-base"
    for flavour in ("first", "second"):
        write_image(workspace, f"base-{flavour}", "\n".join(BUSYBOX + ["files:", "  /etc/flavour: flavour", ""]),
                    {"flavour": f"{flavour} {uuid.uuid4().hex}\n"})
        assert run_cli(["lock", f"base-{flavour}"], workspace).returncode == 0
        assert run_cli(["image", f"base-{flavour}"], workspace).returncode == 0
    assert run_cli(["push", "base-first", "--to", base, "--tag", "stable"], workspace).returncode == 0
    write_image(workspace, "app", f"base: {base}:stable\nplatform: linux/amd64\nentrypoint: [\"cat\", \"/etc/flavour\"]\n")
    assert run_cli(["lock", "app"], workspace).returncode == 0
    # upstream moves the tag
    assert run_cli(["push", "base-second", "--to", base, "--tag", "stable"], workspace).returncode == 0
    proc = run_cli(["image", "app"], workspace)
    assert proc.returncode == 0, proc.stderr
    flavour = docker("run", "--rm", "enginebuild/app:latest").stdout
    report.count("upstream integrity", "moved tags tried")
    report.count("upstream integrity", "moved tags built from the locked digest", int(flavour.startswith("first")))
    assert flavour.startswith("first")
    assert run_cli(["lock", "--check", "app"], workspace).returncode == 0  # the lock is still what the spec asks


@pytest.mark.network
def test_a_stored_file_that_no_longer_matches_its_pin_is_refused_and_deleted(pypi_reachable, tmp_path):
    from enginebuild.resolve.pypi import PyPI, target_tags
    from enginebuild.http import Http

    pin = PyPI(Http()).resolve_requirement("six==1.16.0", target_tags("3.11", "amd64"))
    lock = Lock("t", "2026-01-01T00:00:00Z", {"python": {"request": {}, "resolved": {"files": [pin]}}})
    fetcher = Fetcher(tmp_path, lock)
    item = ContextItem(f"python/{pin['filename']}", pin["sha256"], artifact=pin["sha256"])
    fetcher.fetch([item])
    stored = Store(tmp_path).path(pin["sha256"])
    with open(stored, "r+b") as handle:  # someone edits the stored wheel
        handle.seek(100)
        handle.write(b"tampered")
    with pytest.raises(FetchError) as info:
        fetcher.materialize(item)
    report.count("upstream integrity", "tampered stored files tried")
    report.count("upstream integrity", "tampered stored files refused", int(not stored.exists()))
    assert "deleted it" in info.value.message and not stored.exists()
    fetcher.fetch([item])  # fetched again, verified again
    assert Path_bytes_ok(stored, pin["sha256"])


def Path_bytes_ok(path, sha256: str) -> bool:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest() == sha256


@pytest.mark.docker
@pytest.mark.network
def test_an_engine_that_stops_mid_build_records_nothing_and_the_next_run_resumes(workspace, docker_engine, tmp_path,
                                                                                  debian_reachable):
    need(os.geteuid() == 0 and shutil.which("dockerd") is not None, "a second Docker engine needs root and dockerd")
    folder = tmp_path / "engine"
    engine = start_engine(folder, index=5)
    home = tmp_path / "home"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), DOCKER_HOST=engine.host, ENGINEBUILD_HOME=str(home))
    args = ["image", "demo", "--build-arg", "DEMO_ENGINE_UNITS=8",
            "--build-arg", f"CFLAGS=-O2 -DRUN={uuid.uuid4().hex[:8]}"]
    proc = subprocess.Popen([sys.executable, "-m", "enginebuild", *args], cwd=workspace, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr_lines = []
    try:
        for line in proc.stderr:
            stderr_lines.append(line)
            if "engine-build" in line and "building ..." in line:
                time.sleep(1.0)
                engine.stop(keep_data=True)  # the engine goes away mid-build
                break
        stdout, rest = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    stderr = "".join(stderr_lines) + rest
    report.count("engine faults", "engine stopped mid-build")
    assert proc.returncode == 1, stderr
    assert "stopped answering while stage demo/engine-build was building" in stderr
    assert "Traceback" not in stderr
    history = json.loads((home / "history/enginebuild_demo@latest.json").read_text())
    assert set(history) == {"system", "engine-source", "patches"}  # nothing recorded for the stage that failed
    assert not list((home / "plans").glob("demo-*.json")) if (home / "plans").exists() else True
    engine = start_engine(folder, index=5)
    try:
        env["DOCKER_HOST"] = engine.host
        again = subprocess.run([sys.executable, "-m", "enginebuild", *args], cwd=workspace, env=env,
                               capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stderr
        assert "built 2 of 5 stages (engine-build, files)" in again.stdout
        report.count("engine faults", "resumed from the stages already built")
    finally:
        engine.stop()
