"""Bit-for-bit reproducible images: the demo (components compiled from source, a Python layer,
system packages, files) pushed from the test worker's engine, with whatever its store holds, is
rebuilt by `reproduce` from the lock on a fresh engine with an empty store, nothing reused, and
found identical layer by layer; a step that writes the time makes it fail locally, naming the
file and stage, every other layer equal."""
import os
import shutil
import uuid

import pytest

from conftest import need
from helpers import report
from helpers.engines import start_engine
from helpers.inprocess import run_in_process

pytestmark = [pytest.mark.docker, pytest.mark.network]
AMD64 = ["--platform", "linux/amd64"]


def test_a_step_that_writes_the_time_is_named_with_its_file(workspace, docker_engine, debian_reachable,
                                                            pypi_reachable):
    spec = workspace / "images/demo/image.yaml"
    spec.write_text(spec.read_text() + "\nsteps:\n  - name: stamp\n    run: \"date +%s%N > /stamp\"\n")
    assert run_in_process(["lock", "demo"], workspace).returncode == 0
    assert run_in_process(["image", "demo", *AMD64], workspace).returncode == 0
    # one rebuild with nothing reused (a minute of the suite each): its text names the layer, the
    # stage and the file, and only that layer differs (every other one compared equal); the JSON
    # form of the same verdicts is test_cli's (in process)
    proc = run_in_process(["reproduce", "demo", *AMD64], workspace)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "rebuilt from the lock with nothing reused" in proc.stdout
    assert "component kernels: built" in proc.stderr and "component engine: built" in proc.stderr
    lines = proc.stdout.splitlines()
    bad = [i for i, line in enumerate(lines) if line.startswith("  DIFFERS")]
    assert len(bad) == 1 and ": " in lines[bad[0]] and " step stamp: " in lines[bad[0]], proc.stdout
    assert lines[bad[0] + 1].strip().startswith("/stamp: ") and "sha256" in lines[bad[0] + 1], proc.stdout
    assert "demo (linux/amd64): NOT reproducible" in proc.stdout
    report.count("reproducibility", "nondeterministic steps named by reproduce")


@pytest.mark.registry
def test_a_fresh_engine_with_an_empty_store_reproduces_the_index_this_engine_pushed(
        workspace, tmp_path, registry, docker_engine, debian_reachable, pypi_reachable):
    need(os.geteuid() == 0 and shutil.which("dockerd") is not None, "a second Docker engine needs root and dockerd")
    # this worker's engine and store, whatever they already hold, build and push the demo
    assert run_in_process(["image", "demo"], workspace).returncode == 0
    target = f"{registry.host}/enginebuild-test/repro-{uuid.uuid4().hex[:6]}"
    pushed = run_in_process(["push", "demo", "--to", target, "--tag", "v1"], workspace)
    assert pushed.returncode == 0, pushed.stderr
    reference = pushed.stdout.strip().splitlines()[-1]
    # another engine (no image, no BuildKit cache) and an empty home rebuild it from the lock
    engine = start_engine(tmp_path / "engine7", index=7)
    try:
        env = {**engine.env, "ENGINEBUILD_HOME": str(tmp_path / "home7")}
        proc = run_in_process(["reproduce", "demo", *AMD64, "--against", reference], workspace, env=env)
    finally:
        engine.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for component in ("kernels", "engine", "engine-py", "cuda-kernels"):  # everything built, nothing reused
        assert f"component {component}: built" in proc.stderr, proc.stderr[-3000:]
    assert f"compared with {reference}" in proc.stdout and "demo (linux/amd64): reproducible:" in proc.stdout
    report.count("reproducibility", "fresh engines that rebuilt the demo identical to the pushed index")
    bad = run_in_process(["reproduce", "demo", "--against", f"{target}:v1"], workspace)
    assert bad.returncode == 2 and "give a digest" in bad.stderr
