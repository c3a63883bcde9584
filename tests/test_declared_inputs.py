"""Declared inputs of a component (Bazel's rule): its key covers only the paths of its patched
source it says it reads, only those are in its build, a patch touching none of them rebuilds
nothing (and `plan` says so), and a build reading an undeclared file fails naming it."""
from __future__ import annotations

import json

import pytest

from helpers.docker import docker, read_file
from helpers.inprocess import run_in_process
from helpers.specs import BUSYBOX_BUILDER, write_image, write_patch

pytestmark = pytest.mark.docker

# an engine (folder unit/, component `compiled`: no name the demo's tests look for) whose
# compiled part is src/ (each unit "compiled" into the output, one line each) and
# whose script part is py/launcher.py, which this component does not build
SPEC = BUSYBOX_BUILDER + """components:
  compiled:
    source: {path: unit}
    patches: [PATCHES]
    inputs: ["src/**", "build.cfg"]
    build: {script: unit/build.sh}
    outputs: {paths: [/opt/engine/units.txt]}
install: [compiled]
"""
BUILD = ("#!/bin/sh\nset -e\nmkdir -p /opt/engine\n"
         "for unit in src/*.c; do echo \"compiled $unit: $(wc -c < \"$unit\")\"; done > /opt/engine/units.txt\n"
         "READ_ALSO\n")
FILES = {"unit/src/a.c": "int a = 1;\n", "unit/src/b.c": "int b = 2;\n", "unit/build.cfg": "O2\n",
         "unit/py/launcher.py": "LAYERS = range(1, 62, 15)\n"}


def patch_of(path: str, old: str, new: str) -> str:
    return (f"Subject: edit {path}\nDescription: a test edit\nUpstream: not forwarded (test)\n---\n"
            f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n")


def spec(patches: list[str]) -> str:
    return SPEC.replace("PATCHES", ", ".join(patches))


def write(ws, patches: list[str], read_also: str = "") -> None:
    files = dict(FILES)
    files["unit/build.sh"] = BUILD.replace("READ_ALSO", read_also)
    write_image(ws, "t", spec(patches), files)


def plan(ws) -> dict:
    proc = run_in_process(["plan", "t", "--json"], ws)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["images"][0]


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "repo"
    (root / "lockfiles").mkdir(parents=True)
    return root


def test_a_patch_outside_the_declared_inputs_rebuilds_nothing_and_one_inside_is_named(ws, docker_engine,
                                                                                    debian_reachable):
    write_patch(ws, "t/0001-launcher.patch", patch_of("py/launcher.py", "LAYERS = range(1, 62, 15)",
                                                      "LAYERS = range(2, 63, 15)"))
    write(ws, ["t/0001-launcher.patch"])
    assert run_in_process(["lock", "t"], ws).returncode == 0
    proc = run_in_process(["image", "t"], ws)
    assert proc.returncode == 0, proc.stderr
    units = read_file("enginebuild/t:latest", "/opt/engine/units.txt").decode()
    assert units == "compiled src/a.c: 11\ncompiled src/b.c: 11\n"
    # the patch edits the script part only: the component's key does not move, plan says why
    (ws / "patches/t/0001-launcher.patch").write_text(patch_of("py/launcher.py", "LAYERS = range(1, 62, 15)",
                                                               "LAYERS = range(3, 64, 15)"))
    doc = plan(ws)
    engine = doc["components"][0]
    assert engine["action"] == "exists" and doc["components_to_build"] == []
    assert engine["outside_declared_inputs"] == ["patches/t/0001-launcher.patch"]
    text = run_in_process(["plan", "t"], ws).stdout
    assert "patches/t/0001-launcher.patch touches none of its declared inputs" in text
    # a patch of a declared input rebuilds it, and plan names that patch
    write_patch(ws, "t/0002-unit.patch", patch_of("src/b.c", "int b = 2;", "int b = 22;"))
    write(ws, ["t/0001-launcher.patch", "t/0002-unit.patch"])
    doc = plan(ws)
    assert doc["components_to_build"] == ["compiled"]
    assert "patches/t/0002-unit.patch" in " ".join(doc["components"][0]["changed"])
    proc = run_in_process(["image", "t"], ws)
    assert proc.returncode == 0, proc.stderr
    units = read_file("enginebuild/t:latest", "/opt/engine/units.txt").decode()
    assert units == "compiled src/a.c: 11\ncompiled src/b.c: 12\n"
    docker("rmi", "-f", "enginebuild/t:latest", check=False)


@pytest.mark.parametrize("stack", [[], ["t/0001-launcher.patch"]], ids=["no-patches", "a-patch-outside"])
def test_a_build_reading_an_undeclared_file_fails_naming_it(ws, docker_engine, debian_reachable, stack):
    """With a patch stack too: the stack is checked on the host before the build, and that
    tree holds only the declared inputs as well."""
    write_patch(ws, "t/0001-launcher.patch", patch_of("py/launcher.py", "LAYERS = range(1, 62, 15)",
                                                      "LAYERS = range(4, 65, 15)"))
    write(ws, stack, read_also="cat py/launcher.py >> /opt/engine/units.txt")
    (ws / "images/t/image.yaml").write_text((ws / "images/t/image.yaml").read_text().replace("    patches: []\n", ""))
    assert run_in_process(["lock", "t"], ws).returncode == 0
    proc = run_in_process(["image", "t"], ws)
    assert proc.returncode == 1
    assert "py/launcher.py" in proc.stderr and "No such file" in proc.stderr, proc.stderr


def test_declared_inputs_without_a_source_are_refused(ws):
    write_image(ws, "t", BUSYBOX_BUILDER + "components:\n  e:\n    inputs: [src]\n    build: {script: b.sh}\n"
                         "    outputs: {paths: [/x]}\ninstall: [e]\n", {"b.sh": "#!/bin/sh\n"})
    proc = run_in_process(["plan", "t"], ws)
    assert proc.returncode == 2 and "components.e.inputs: declared inputs are paths of the component's source" \
        in proc.stderr, proc.stderr
