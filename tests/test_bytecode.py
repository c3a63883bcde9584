"""Bytecode in the image: every layer that holds `.py` files gets a layer of hash-based `.pyc` files
compiled by the image's own interpreter, so a fresh container imports without compiling; an edit
compiles only the layer it changed; `bytecode: false` ships none; a file the interpreter cannot
compile is left to Python, the rest compiled."""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from enginebuild.io.store import Store
from helpers.docker import docker
from helpers.inprocess import run_in_process
from helpers.specs import BUSYBOX_BUILDER, write_image

pytestmark = [pytest.mark.docker, pytest.mark.network]

SPEC = BUSYBOX_BUILDER + """system:
  install: extract
  packages: [busybox-static, python3]
  run: [["/bin/busybox", "--install", "-s", "/bin"], "mkdir -p /tmp && chmod 1777 /tmp"]
components:
  maker:
    source: {path: maker}
    build: {script: maker/build.sh}
    outputs: {prefix: /out, to: /opt/ebmod}
install: [maker]
env: {PYTHONPATH: /opt/ebmod}
entrypoint: ["/usr/bin/python3"]
"""
BUILD = """#!/bin/sh
set -e
mkdir -p "$ENGINEBUILD_OUTPUTS/ebpkg"
cp src/ebpkg/*.py "$ENGINEBUILD_OUTPUTS/ebpkg/"
"""
# what a fresh container compiled to import: `python3 -v` names each code object's origin
IMPORTS = "import json, email.parser, asyncio, ebpkg.values"


def _origins(tag: str) -> tuple[int, list[str]]:
    """(modules read from bytecode, modules compiled from source) when a fresh, read-only container imports."""
    out = docker("run", "--rm", "--read-only", "-e", "PYTHONDONTWRITEBYTECODE=1", tag, "-v", "-c", IMPORTS,
                 check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    objects = [line.split("code object from ", 1)[1].strip("'") for line in out.stderr.splitlines()
               if line.startswith("# code object from ")]
    return sum(1 for o in objects if o.endswith(".pyc")), [o for o in objects if not o.endswith(".pyc")]


def _bytecode_layers(workspace, *extra: str) -> list[str]:
    """The blobs of the image's bytecode layers, as the store records the plan's bytecode row."""
    proc = run_in_process(["plan", "pyc", "--json", *extra], workspace)
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in json.loads(proc.stdout)["images"][0]["layers"] if r["name"].startswith("bytecode ")]
    store = Store(Path(os.environ["ENGINEBUILD_HOME"]))
    return [sha for row in rows for sha, _ in store.record("layers", row["content_key"])["layers"]]


def _compiled() -> dict[str, str]:
    """Each source layer compiled in this store: its part's record -> the layer's name."""
    folder = Path(os.environ["ENGINEBUILD_HOME"]) / "records/bytecode"
    found = {p.name: json.loads(p.read_text()) for p in folder.glob("*.json")} if folder.is_dir() else {}
    return {name: doc["layer"] for name, doc in found.items() if "layer" in doc}


def test_a_fresh_container_imports_from_the_images_bytecode_and_an_edit_compiles_one_layer(
        workspace, docker_engine, debian_reachable, pypi_reachable):
    write_image(workspace, "pyc", SPEC, {"maker/src/ebpkg/__init__.py": "",
                                         "maker/src/ebpkg/values.py": 'VALUE = {"a", "b", "c"}\n',
                                         "maker/src/ebpkg/py2.py": 'print "a syntax Python 3 does not read"\n',
                                         "maker/build.sh": BUILD})
    assert run_in_process(["lock", "pyc"], workspace).returncode == 0
    tag = f"enginebuild-test/pyc:{uuid.uuid4().hex[:8]}"
    bare = f"enginebuild-test/pyc:{uuid.uuid4().hex[:8]}-bare"
    known = _compiled()  # the home is the session's: another test's parts are not this one's
    try:
        proc = run_in_process(["image", "pyc", "-t", tag], workspace)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "bytecode (Python 3.11, checked hashes): compiled by the image's /usr/bin/python3" in proc.stderr
        from_pyc, compiled = _origins(tag)
        assert from_pyc > 40 and compiled == [], compiled  # the standard library's and the output's
        # a file the interpreter cannot read is left to Python (as pip leaves it): no .pyc, the build ok
        said = docker("run", "--rm", tag, "-c", "import os; print(sorted(os.listdir('/opt/ebmod/ebpkg/__pycache__')))"
                      ).stdout
        assert said.strip() == "['__init__.cpython-311.pyc', 'values.cpython-311.pyc']", said
        before = _bytecode_layers(workspace)
        parts = {k: v for k, v in _compiled().items() if k not in known}
        # the system packages' (the standard library), the busybox commands' and the output's, packed in one layer
        assert len(before) == 1 and sorted(parts.values()).count("outputs of maker (prefix)") == 1, parts

        # an edit of the component: its output layer is new, so is its bytecode; the standard library's is kept
        (workspace / "images/pyc/maker/src/ebpkg/values.py").write_text('VALUE = {"a", "b", "d"}\n')
        proc = run_in_process(["image", "pyc", "-t", tag], workspace)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        after, compiled = _bytecode_layers(workspace), _compiled()
        assert after != before
        assert [compiled[n] for n in set(compiled) - set(parts) - set(known)] == ["outputs of maker (prefix)"], compiled
        assert docker("run", "--rm", tag, "-c", "import ebpkg.values as v; print(sorted(v.VALUE))"
                      ).stdout.strip() == "['a', 'b', 'd']"
        assert _origins(tag)[1] == []

        # bytecode: false ships none: every module compiled at import
        proc = run_in_process(["image", "pyc", "--set", "bytecode=false", "-t", bare], workspace)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert _bytecode_layers(workspace, "--set", "bytecode=false") == []
        from_pyc, compiled = _origins(bare)
        assert from_pyc == 0 and len(compiled) > 40
        plan = run_in_process(["plan", "pyc", "--set", "bytecode=false"], workspace).stdout
        assert "bytecode" not in plan, plan
    finally:
        docker("rmi", "-f", tag, bare, "enginebuild/pyc:latest", "enginebuild/pyc:latest-amd64", check=False)
