"""A patch applied as files to an output whose build shipped the patched module's bytecode: the
build copied the file keeping its time (`cp -p`, setuptools' build_py, `install -p`) and compiled
it, so the timestamp pyc names the very time and size the image's file has; with a same-size edit
Python took the old bytecode and ran the unpatched code. The layer of patched files removes that
pyc, and the image's bytecode layers hold the patched file's own: the image runs what the patch
says, from bytecode compiled of the patched source."""
from __future__ import annotations

import json
import re
import uuid

import pytest

from enginebuild.io.store import Store
from helpers.docker import docker
from helpers.inprocess import run_in_process
from helpers.specs import write_image

pytestmark = [pytest.mark.docker, pytest.mark.network]

SPEC = """base: scratch
platform: linux/amd64
system:
  install: extract
  packages: [busybox-static, python3]
  run: [["/bin/busybox", "--install", "-s", "/bin"], "mkdir -p /tmp && chmod 1777 /tmp"]
builder:
  base: scratch
  system:
    install: extract
    packages: [busybox-static, python3]
    run: [["/bin/busybox", "--install", "-s", "/bin"]]
components:
  maker:
    source: {path: maker}
    patches: [maker/0001-new-value.patch]
    build: {script: maker/build.sh}
    outputs: {prefix: /out, to: /opt/ebmod}
install: [maker]
env: {PYTHONPATH: /opt/ebmod}
entrypoint: ["/usr/bin/python3"]
"""
# the build: ebmod.py copied as it is with the time the image gives its files (the layer epoch, 1),
# and the timestamp bytecode compiled from that copy, beside it at the output's top
BUILD = """#!/bin/sh
set -e
mkdir -p "$ENGINEBUILD_OUTPUTS"
cp -p src/ebmod.py "$ENGINEBUILD_OUTPUTS/ebmod.py"
touch -d @1 "$ENGINEBUILD_OUTPUTS/ebmod.py"
cd "$ENGINEBUILD_OUTPUTS" && python3 -c 'import py_compile as p; p.compile("ebmod.py", doraise=True, \
    invalidation_mode=p.PycInvalidationMode.TIMESTAMP)'
"""
PATCH = """Subject: ebmod: the new value
Description: a same-size edit of a module the wheel ships compiled
Upstream: not forwarded (test)
---
--- a/src/ebmod.py
+++ b/src/ebmod.py
@@ -1 +1 @@
-VALUE = "old"
+VALUE = "new"
"""


READ = """import importlib.util as u, sys
import ebmod
pyc = open('/opt/ebmod/__pycache__/ebmod.cpython-311.pyc', 'rb').read()
source = open('/opt/ebmod/ebmod.py', 'rb').read()
print(ebmod.VALUE, int.from_bytes(pyc[4:8], 'little'), pyc[8:16] == u.source_hash(source),
      ebmod.__spec__.cached == '/opt/ebmod/__pycache__/ebmod.cpython-311.pyc')
"""


def test_a_patched_module_runs_patched_though_its_build_shipped_matching_timestamp_bytecode(
        workspace, docker_engine, debian_reachable, pypi_reachable):
    write_image(workspace, "pyc", SPEC, {"maker/src/ebmod.py": 'VALUE = "old"\n', "maker/build.sh": BUILD})
    patch = workspace / "patches/maker/0001-new-value.patch"
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text(PATCH)
    assert run_in_process(["lock", "pyc"], workspace).returncode == 0
    tag = f"enginebuild-test/pyc:{uuid.uuid4().hex[:8]}"
    try:
        proc = run_in_process(["image", "pyc", "-t", tag], workspace)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        plan = run_in_process(["plan", "pyc"], workspace).stdout
        assert "0001-new-value.patch applied as files" in plan, plan
        # nothing written by this run (PYTHONDONTWRITEBYTECODE): what the image holds answers
        said = docker("run", "--rm", "-e", "PYTHONDONTWRITEBYTECODE=1", tag, "-c", READ).stdout.split()
        # the patched code, from the image's bytecode: hash-based and checked (flags 3), of the patched
        # source the image holds (the output's own pyc and the one compiled of its unpatched copy are below)
        assert said == ["new", "3", "True", "True"], said
    finally:
        docker("rmi", "-f", tag, "enginebuild/pyc:latest", check=False)


def test_a_patch_edit_on_a_fresh_ci_runner_compiles_its_bytecode_in_the_interpreters_chain_alone(
        workspace, registry, tmp_path, docker_engine, debian_reachable, pypi_reachable):
    """The CI job after a patch edit, on a fresh runner: every layer the edit leaves as it was is
    stood in by the registry cache, and the new layer of patched files gets its bytecode compiled
    in the chain that holds the interpreter (the system packages), taken from the cache alone: the
    bytecode of the rest of the image is not fetched, and the pushed image runs the edited patch
    from its own bytecode."""
    write_image(workspace, "pyc", SPEC, {"maker/src/ebmod.py": 'VALUE = "old"\n', "maker/build.sh": BUILD})
    patch = workspace / "patches/maker/0001-new-value.patch"
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text(PATCH)
    assert run_in_process(["lock", "pyc"], workspace).returncode == 0
    salt = uuid.uuid4().hex[:8]
    cache, target = (f"{registry.host}/enginebuild-test/{n}-{salt}" for n in ("pyc-cache", "pyc"))

    def runner(name: str) -> str:
        proc = run_in_process(["image", "pyc", "--no-load", "--cache", cache, "--push", "--to", target], workspace,
                              env={"ENGINEBUILD_HOME": str(tmp_path / name)})
        said = proc.stdout + proc.stderr
        assert proc.returncode == 0, said[-3000:]
        return said

    runner("first")
    patch.write_text(PATCH.replace('+VALUE = "new"', '+VALUE = "niu"'))
    said = runner("second")
    assert re.search(r"layer\(s\) stood in by \S+ \(made and pushed elsewhere\); \d+ to make here", said), said[-3000:]
    assert "bytecode of the edited layers (Python 3.11, checked hashes): compiled by the image's /usr/bin/python3" \
        in said, said[-3000:]
    plan = json.loads(run_in_process(["plan", "pyc", "--json"], workspace,
                                     env={"ENGINEBUILD_HOME": str(tmp_path / "second")}).stdout)
    rows = {r["name"].split(" (")[0]: r for r in plan["images"][0]["layers"]}
    store = Store(tmp_path / "second")
    blobs = {name: [sha for sha, _ in store.record("layers", rows[name]["content_key"])["layers"]]
             for name in ("bytecode", "bytecode of the edited layers")}
    assert not any(store.has(sha) for sha in blobs["bytecode"]), "the unedited layers' bytecode was fetched"
    assert all(store.has(sha) for sha in blobs["bytecode of the edited layers"])
    pushed = re.findall(re.escape(target) + r"@sha256:[0-9a-f]{64}", said)[-1]
    try:
        docker("pull", "-q", pushed)
        out = docker("run", "--rm", "-e", "PYTHONDONTWRITEBYTECODE=1", pushed, "-c", READ).stdout.split()
        assert out == ["niu", "3", "True", "True"], out
    finally:
        docker("rmi", "-f", pushed, check=False)
