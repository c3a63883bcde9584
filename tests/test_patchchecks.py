"""Reading a patch's checks file (recipe/patchchecks.py): every mistake names the file, line and
key; outputs compare as a user reads them (line ends and trailing blanks aside)."""
from __future__ import annotations

import re

import pytest

from enginebuild.recipe.patchchecks import PatchCheck, normal, read_checks
from helpers.inprocess import run_in_process
from helpers.specs import write_image

NO_DOCKER = {"ENGINEBUILD_DOCKER": "/bin/false", "DOCKER_HOST": "unix:///nonexistent.sock"}
PATCH = """Subject: s
Description: d
Upstream: not forwarded (a test)
---
diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -1 +1 @@
-a
+b
"""


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "repo"
    (root / "lockfiles").mkdir(parents=True)
    (root / "patches" / "e").mkdir(parents=True)
    (root / "patches/e/0001-x.patch").write_text(PATCH)
    write_image(root, "t", "base: scratch\nplatform: linux/amd64\ncomponents:\n  e:\n    source: {path: src}\n"
                           "    patches: [e/0001-x.patch]\n    build: {script: build.sh}\n    outputs: {paths: [/x]}\n"
                           "install: [e]\n", {"src/a.txt": "a\n", "build.sh": "#!/bin/sh\ntrue\n"})
    return root


@pytest.mark.parametrize("body,key,message", [
    ("checks:\n  - name: a\n    expect: x\n", "checks[0]", "needs one of: python, run"),
    ("checks:\n  - name: a\n    python: print(1)\n    run: ['true']\n", "checks[0]", "give only one of python, run"),
    ("checks:\n  - name: a\n    run: ['true']\n    expect-match: '('\n", "checks[0].expect-match",
     "not a regular expression"),
    ("checks:\n  - name: a\n    run: ['true']\n    needs: [tpu]\n", "checks[0].needs[0]", "expected one of gpu"),
    ("checks:\n  - name: a\n    run: ['true']\n    timeout: soon\n", "checks[0].timeout", "expected a duration"),
    ("checks:\n  - name: a\n    run: ['true']\n  - name: a\n    run: ['true']\n", "checks", "two checks are named 'a'"),
    ("checks:\n  - name: a\n    run: ['true']\n    expct: x\n", "checks[0].expct", "unknown key"),
])
def test_a_checks_file_with_a_mistake_is_refused_naming_file_line_and_key(ws, body, key, message):
    (ws / "patches/e/0001-x.checks.yaml").write_text(body)
    proc = run_in_process(["plan", "t", "--unpinned"], ws, env=NO_DOCKER)
    assert proc.returncode == 2, proc.stderr
    assert re.search(r"error: patches/e/0001-x\.checks\.yaml(:\d+)?: " + re.escape(key) + ": ", proc.stderr), \
        proc.stderr
    assert message in proc.stderr, proc.stderr


def test_checks_are_read_with_their_command_and_outputs(ws):
    (ws / "patches/e/0001-x.checks.yaml").write_text(
        "checks:\n  - name: prints\n    python: |\n      print('b')\n    expect: b\n    unpatched: a\n"
        "    timeout: 2m\n    env: {X: '1'}\n  - name: shell\n    run: echo hi\n    expect-match: 'h.'\n")
    first, second = read_checks(ws / "patches/e/0001-x.patch", "e/0001-x.patch", ws)
    assert first.argv(("/usr/bin/python3.11", "-X", "utf8")) == ["/usr/bin/python3.11", "-X", "utf8", "-c", "print('b')\n"]
    assert first.timeout_s == 120 and first.env == (("X", "1"),) and first.shown() == "python: print('b')"
    assert second.argv(("python3",)) == ["/bin/sh", "-c", "echo hi"]
    assert first.patched_by("b \r\n\n") and first.unpatched_by("a\n") and not first.patched_by("bb")
    assert second.patched_by("hi\n") and second.unpatched_by("x") is None
    assert normal("a  \r\nb\t\n\n") == "a\nb"


def test_a_patch_without_a_checks_file_has_none(ws):
    assert read_checks(ws / "patches/e/0001-x.patch", "e/0001-x.patch", ws) == ()
    assert isinstance(PatchCheck, type)


def test_checks_trust_the_images_bytecode_only_where_every_source_above_it_is_compiled_above_it():
    """The checks of an image run its interpreter with `--check-hash-based-pycs never` where every
    layer above the first bytecode layer that may hold a `.py` file is compiled by a bytecode layer
    above it (the mission image: the bytecode of everything an edit leaves alone sits below the
    patched files, whose bytecode is above them; manifest and shell scripts on top); a `.py` put on
    top, or no bytecode at all, keeps the hashes checked."""
    import dataclasses

    from conftest import ROOT
    from enginebuild.checks.imports import check_python
    from enginebuild.layerkinds.files import Files
    from enginebuild.plan.image import plan_image
    from enginebuild.plan.model import LayerNode
    from enginebuild.recipe.model import FileEntry
    from enginebuild.workspace import Workspace

    ws = Workspace(ROOT)
    spec = ws.spec("qwen36-dflash-pypi")
    plan = plan_image(spec, ws.lock(spec), "linux/amd64", ws.plan_options(strict=False))
    kinds = [n.kind for n in plan.runtime.layers]
    above = kinds[kinds.index("bytecode") + 1:]
    assert above[:3] == ["patched", "bytecode", "manifest"] and set(above[3:]) == {"files"}, above
    patched, bytecode = (plan.runtime.layers[kinds.index("bytecode") + i] for i in (1, 2))
    assert bytecode.payload.compiles() == (patched.stored_as,)  # the edited layer's bytecode, alone
    assert check_python(plan) == ("/usr/bin/python3", "--check-hash-based-pycs", "never")

    def with_file(dest: str) -> object:
        entry = FileEntry(dest, 0o644, display=dest)
        node = LayerNode("files", f"files {dest}", "k", "c", Files((entry,), ("0" * 64,)))
        return dataclasses.replace(plan, runtime=dataclasses.replace(
            plan.runtime, layers=(*plan.runtime.layers, node)))

    assert check_python(with_file("/opt/enginebuild/bin/serve.py")) == ("/usr/bin/python3",)
    assert check_python(with_file("/opt/enginebuild/bin/serve.sh"))[1:] == ("--check-hash-based-pycs", "never")
    bare = plan_image(dataclasses.replace(spec, bytecode=False), ws.lock(spec), "linux/amd64",
                      ws.plan_options(strict=False))
    assert "bytecode" not in [n.kind for n in bare.runtime.layers]
    assert check_python(bare) == ("/usr/bin/python3",)
