"""Bad values on the command line and in specs that once ended in a traceback or were taken
silently: each is refused with exit 2, naming the value, before anything is built."""
from __future__ import annotations

import json
import re

import pytest

from helpers.inprocess import run_in_process
from helpers.specs import BUSYBOX_BUILDER, write_image

NO_DOCKER = {"ENGINEBUILD_DOCKER": "/bin/false", "DOCKER_HOST": "unix:///nonexistent.sock"}
COMPONENT = BUSYBOX_BUILDER + """components:
  e:
    source: {path: src}
    build: {script: build.sh}
    outputs: {paths: [/x]}
install: [e]
"""


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "repo"
    (root / "lockfiles").mkdir(parents=True)
    write_image(root, "t", COMPONENT, {"src/a": "a\n", "build.sh": "#!/bin/sh\necho built > /x\n"})
    return root


@pytest.mark.parametrize("address", ["ssh://h:99999", "ssh://h:abc", "tcp://h:99999", "tcp://[::1", "tcp://:2375"])
@pytest.mark.parametrize("verb", [["image", "t"], ["doctor"]])
def test_a_builder_address_that_cannot_be_used_is_refused_naming_it(ws, address, verb):
    proc = run_in_process([*verb, "--builder", address], ws, env=NO_DOCKER)
    assert "Traceback" not in proc.stderr
    if verb == ["doctor"]:  # doctor reports it as a failed check, and exits 1
        assert proc.returncode == 1 and address in proc.stdout, proc.stdout + proc.stderr
    else:
        assert proc.returncode == 2, proc.stderr
        assert f"--builder {address!r}: " in proc.stderr, proc.stderr


def test_one_folder_for_two_outputs_is_refused(ws, tmp_path):
    folder = tmp_path / "out"
    proc = run_in_process(["image", "t", "--output", str(folder), "--output", f"e={folder}"], ws, env=NO_DOCKER)
    assert proc.returncode == 2 and f"--output {folder}: named twice" in proc.stderr, proc.stderr
    assert not folder.exists()


@pytest.mark.parametrize("folder", ["/", "/tmp", "/tmp/tree", "/usr/lib/x", "/opt/enginebuild/src", "/app"])
def test_an_editable_tree_outside_a_folder_of_its_own_is_refused(ws, folder):
    spec = COMPONENT.replace("outputs: {paths: [/x]}", f"outputs: {{editable: {folder}}}").replace(
        "install: [e]", "python:\n  version: '3.11'\n  requirements: [{requirement: e, component: e}]")
    write_image(ws, "t", spec)
    proc = run_in_process(["plan", "t"], ws, env=NO_DOCKER)
    assert proc.returncode == 2, proc.stderr
    assert re.search(r"images/t/image\.yaml:\d+: components\.e\.outputs\.editable: ", proc.stderr), proc.stderr
    assert f"{folder} is" in proc.stderr


@pytest.mark.parametrize("folder,pattern", [("/root/.cache/pkg", "/root/.cache/*"), ("/root/.cache/a/b", "/root/.cache/*")])
def test_an_editable_tree_where_layer_clean_up_drops_files_is_refused(ws, folder, pattern):
    """Before, `editable: /root/.cache/pkg` was accepted, its files dropped by the clean-up of the
    component's outputs, and the build ended with exit 0 and a ModuleNotFoundError later."""
    spec = COMPONENT.replace("outputs: {paths: [/x]}", f"outputs: {{editable: {folder}}}").replace(
        "install: [e]", "python:\n  version: '3.11'\n  requirements: [{requirement: e, component: e}]")
    write_image(ws, "t", spec)
    proc = run_in_process(["plan", "t"], ws, env=NO_DOCKER)
    assert proc.returncode == 2, proc.stderr
    assert re.search(r"images/t/image\.yaml:\d+: components\.e\.outputs\.editable: ", proc.stderr), proc.stderr
    assert f"{folder} lies where layer clean-up drops what a build leaves ({pattern})" in proc.stderr, proc.stderr


@pytest.mark.network
def test_the_only_builder_unreachable_is_named(ws):
    proc = run_in_process(["image", "t", "--builder", "far=tcp://127.0.0.1:9"], ws, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 1, proc.stderr
    assert "error: builder far (tcp://127.0.0.1:9) is unreachable: " in proc.stderr, proc.stderr


def test_no_cache_with_the_engine_unreachable_says_so_first_and_nothing_else(ws, debian_reachable):
    """`--no-cache` once went through planning, patch checks and a builder reassigned to itself
    (27 s of "builder stopped answering") before the engine's error: now it is the first line."""
    assert run_in_process(["lock", "t"], ws, env=NO_DOCKER).returncode == 0
    proc = run_in_process(["image", "t", "--no-cache"], ws, env=NO_DOCKER)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: cannot reach the Docker engine at unix:///nonexistent.sock"), proc.stderr
    assert "stopped answering" not in proc.stderr


def test_a_step_file_given_through_a_link_is_mounted_under_the_name_the_spec_gives(ws):
    folder = ws / "images" / "t"
    (folder / "tools").mkdir()
    (folder / "tools" / "fix-arch-list-v2.sh").write_text("#!/bin/sh\necho fixed\n")
    (folder / "fix.sh").symlink_to("tools/fix-arch-list-v2.sh")
    spec = (folder / "image.yaml").read_text() + ("steps:\n  - name: fix\n    files: [fix.sh]\n"
                                                  "    run: sh /opt/enginebuild/step/fix.sh\n")
    (folder / "image.yaml").write_text(spec)
    proc = run_in_process(["render", "t", "--unpinned"], ws, env=NO_DOCKER)
    assert proc.returncode == 0, proc.stderr
    assert "source=step-files/fix.sh,target=/opt/enginebuild/step/fix.sh" in proc.stdout, proc.stdout
    assert "fix-arch-list-v2.sh" not in proc.stdout


def test_python_without_its_version_is_refused_naming_the_key(ws):
    write_image(ws, "t", "base: scratch\nplatform: linux/amd64\npython:\n  requirements: [six==1.16.0]\n")
    proc = run_in_process(["plan", "t"], ws, env=NO_DOCKER)
    assert proc.returncode == 2, proc.stderr
    assert "images/t/image.yaml:3: python.version: required: the Python version of the image's interpreter" \
        in proc.stderr, proc.stderr


def test_a_launcher_without_its_run_bit_is_refused_before_it_is_built(ws):
    folder = write_image(ws, "t", "base: scratch\nplatform: linux/amd64\nfiles:\n  /opt/app/run.sh: run.sh\n"
                                  "entrypoint: [/opt/app/run.sh]\n", {"run.txt": "x"})
    (folder / "run.sh").write_text("#!/bin/sh\nexec serve\n")
    (folder / "run.sh").chmod(0o644)
    proc = run_in_process(["plan", "t"], ws, env=NO_DOCKER)
    assert proc.returncode == 2, proc.stderr
    assert "images/t/image.yaml:4: files./opt/app/run.sh: images/t/run.sh is the entrypoint's program " \
           "(/opt/app/run.sh) but is not executable (mode 0644)" in proc.stderr, proc.stderr
    assert "chmod +x images/t/run.sh" in proc.stderr
    (folder / "run.sh").chmod(0o755)
    assert "not executable" not in run_in_process(["plan", "t"], ws, env=NO_DOCKER).stderr


def test_messages_that_point_the_right_way(ws):
    """A misspelt key of ours is named before a Docker word; a base given as a build argument, and
    a new key with dots given to --set, are told how enginebuild says them."""
    spec = (ws / "images/t/image.yaml").read_text()
    (ws / "images/t/image.yaml").write_text(spec + "enviroments:\n  x: {base: scratch}\n")
    proc = run_in_process(["plan", "t"], ws, env=NO_DOCKER)
    assert proc.returncode == 2 and "hint: did you mean 'environments'?" in proc.stderr, proc.stderr
    (ws / "images/t/image.yaml").write_text(spec)
    proc = run_in_process(["plan", "t", "--build-arg", "BASE_IMAGE=nvcr.io/nvidia/vllm:26.01-py3"], ws, env=NO_DOCKER)
    assert proc.returncode == 2 and "--on REF@sha256:" in proc.stderr and "--set base=REF" in proc.stderr
    proc = run_in_process(["plan", "t", "--set", "labels.org.example.release=rc1"], ws, env=NO_DOCKER)
    assert proc.returncode == 2, proc.stderr
    assert "'org.example.release' is one key with dots: it is written in brackets" in proc.stderr
    assert "--set 'labels[org.example.release]=…'" in proc.stderr and "quote it" not in proc.stderr
    # a field of a component the spec lacks: the component is named, not a key the new one misses
    proc = run_in_process(["plan", "t", "--set", "components.ee.build.args.X=1"], ws, env=NO_DOCKER)
    assert proc.returncode == 2 and "the spec has no component 'ee' (it has: e)" in proc.stderr, proc.stderr
    assert "did you mean --set components.e.build.args.X=…?" in proc.stderr and "required key" not in proc.stderr


def test_plan_unpinned_plans_from_the_spec_alone(ws):
    proc = run_in_process(["plan", "t", "--unpinned", "--json"], ws, env=NO_DOCKER)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["images"][0]
    assert not doc["buildable"] and "builder.system@linux/amd64" in doc["unresolved"]
    assert not list((ws / "lockfiles").iterdir())  # nothing written


def test_a_build_argument_naming_a_variable_is_refused_saying_nothing_expands(ws):
    spec = (ws / "images/t/image.yaml").read_text().replace(
        "build: {script: build.sh}", 'build: {script: build.sh, args: {CFLAGS: "-O2 ${EXTRA_CFLAGS}", PRICE: "$$5"}}')
    (ws / "images/t/image.yaml").write_text(spec)
    proc = run_in_process(["plan", "t"], ws, env=NO_DOCKER)
    assert proc.returncode == 2, proc.stderr
    assert "components.e.build.args.CFLAGS: refers to ${EXTRA_CFLAGS}: a build argument is a literal value" \
        in proc.stderr, proc.stderr
    (ws / "images/t/image.yaml").write_text(spec.replace('"-O2 ${EXTRA_CFLAGS}"', '"-O2"'))
    from enginebuild.recipe.catalog import Catalog

    assert dict(Catalog(ws).load("t").component("e").build.args)["PRICE"] == "$5"  # $$: a dollar, as in env


@pytest.mark.parametrize("folder", ["/x,id=/x", "/root/.cache,rw=true", "/a=b"])
def test_a_cache_folder_that_would_add_mount_options_is_refused(ws, folder):
    spec = (ws / "images/t/image.yaml").read_text()
    (ws / "images/t/image.yaml").write_text(spec + f"steps:\n  - name: s\n    run: echo hi\n    cache: ['{folder}']\n")
    proc = run_in_process(["plan", "t"], ws, env=NO_DOCKER)
    assert proc.returncode == 2, proc.stderr
    assert re.search(r"images/t/image\.yaml:\d+: steps\[0\]\.cache\[0\]: expected an absolute path of letters, "
                     r"digits and \._@\+- \(a cache folder", proc.stderr), proc.stderr
    (ws / "images/t/image.yaml").write_text(spec.replace("build: {script: build.sh}",
                                                         f"build: {{script: build.sh, cache: ['{folder}']}}"))
    proc = run_in_process(["plan", "t"], ws, env=NO_DOCKER)
    assert proc.returncode == 2 and "components.e.build.cache[0]: expected an absolute path" in proc.stderr, proc.stderr


def test_a_step_file_whose_name_would_add_mount_options_is_refused(ws):
    (ws / "images/t/x,rw=true").write_text("echo hi\n")
    spec = (ws / "images/t/image.yaml").read_text()
    (ws / "images/t/image.yaml").write_text(spec + "steps:\n  - name: s\n    files: ['x,rw=true']\n    run: echo hi\n")
    proc = run_in_process(["plan", "t"], ws, env=NO_DOCKER)
    assert proc.returncode == 2, proc.stderr
    assert re.search(r"images/t/image\.yaml:\d+: steps\[0\]\.files: a step's file is mounted at "
                     r"/opt/enginebuild/step/NAME, and 'x,rw=true' cannot be such a name", proc.stderr), proc.stderr


@pytest.mark.parametrize("value", ["/x,id=/y", "a\"b", "x y", "x=y", ""])
def test_no_mount_option_is_made_of_a_value_that_would_add_one(value):
    from enginebuild.errors import SpecError
    from enginebuild.plan.envs import mounts

    with pytest.raises(SpecError, match="cannot be a mount's path"):
        mounts(cache=(value,))
    assert mounts(cache=("/root/.cache",), sealed=("HF_TOKEN",)) == \
        " --mount=type=cache,id=/root/.cache#secrets=HF_TOKEN,target=/root/.cache"


def test_a_missing_file_or_patch_gets_a_did_you_mean(ws):
    (ws / "images/t/launch.sh").write_text("#!/bin/sh\n")
    spec = (ws / "images/t/image.yaml").read_text()
    (ws / "images/t/image.yaml").write_text(spec + "files:\n  /opt/run.sh: lunch.sh\n")
    proc = run_in_process(["plan", "t"], ws, env=NO_DOCKER)
    assert proc.returncode == 2 and "file not found: images/t/lunch.sh" in proc.stderr, proc.stderr
    assert "hint: did you mean 'launch.sh'?" in proc.stderr
    (ws / "patches/e").mkdir(parents=True)
    (ws / "patches/e/0001-fix-the-thing.patch").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    (ws / "images/t/image.yaml").write_text(spec.replace("    build: {script: build.sh}\n",
                                                         "    patches: [e/0001-fix-teh-thing.patch]\n"
                                                         "    build: {script: build.sh}\n"))
    proc = run_in_process(["plan", "t"], ws, env=NO_DOCKER)
    assert proc.returncode == 2 and "patch not found: patches/e/0001-fix-teh-thing.patch" in proc.stderr
    assert "hint: did you mean 'e/0001-fix-the-thing.patch'?" in proc.stderr, proc.stderr
