"""A script edit is written without planning or a builder (fastedit.py) and gives the image a
full build gives: same files, modes, config, labels, history and layer chain. Everything that is
not only a copied file's bytes or mode goes the full way (and says so by not saying "only files
it copies changed").

The tests run `image` in this process against an engine in memory (tests/helpers/memengine.py), as
the fast tier; what needs a real engine (the edit's image equal to a full build in Docker, steps run
by BuildKit, a push, a build paused in a process of its own) runs against Docker."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from textwrap import dedent

import pytest

from conftest import run_cli
from helpers.docker import docker
from helpers.docker import filesystem as docker_filesystem
from helpers.docker import inspect as docker_inspect
from helpers.inprocess import run_in_process
from helpers.memengine import MemoryEngine
from helpers.specs import FILES_ONLY_FILES, FILES_ONLY_SPEC, write_image

FAST = "(only files it copies changed)"
AMD64 = ["--platform", "linux/amd64"]
NO_BUILDER = {"ENGINEBUILD_DOCKER": "/bin/false"}  # a path that needs the builder fails

SPEC, FILES = FILES_ONLY_SPEC, FILES_ONLY_FILES  # files over scratch (tests/test_build_loop.py builds it in process)


class InMemory:
    """`image` in this process, loading into an engine in memory."""

    def __init__(self) -> None:
        self.engine = MemoryEngine()

    def run(self, args, ws: Path, env: dict | None = None):
        return run_in_process(args, ws, env=env, docker=self.engine)

    def inspect(self, ref: str) -> dict:
        found = self.engine.inspect(ref)
        assert found is not None, ref
        return found

    def filesystem(self, ref: str) -> dict:
        return self.engine.filesystem(ref)

    def history(self, ref: str) -> list[str]:
        return self.engine.history(ref)

    def image_id(self, ref: str) -> str | None:
        return self.engine.image_id(ref)

    def untag(self, ref: str) -> None:
        self.engine.remove(ref)


class InDocker:
    """`python -m enginebuild image` in a process of its own, loading into the Docker engine."""

    def run(self, args, ws: Path, env: dict | None = None):
        return run_cli(args, ws, env=env)

    inspect = staticmethod(docker_inspect)
    filesystem = staticmethod(docker_filesystem)

    def history(self, ref: str) -> list[str]:
        return docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", ref).stdout.splitlines()

    def image_id(self, ref: str) -> str | None:
        found = docker("image", "inspect", "--format", "{{.Id}}", ref, check=False)
        return found.stdout.strip() if found.returncode == 0 else None

    def untag(self, ref: str) -> None:
        docker("rmi", ref, check=False)


@pytest.fixture
def on() -> InMemory:
    return InMemory()


@pytest.fixture
def dock(docker_engine) -> InDocker:
    return InDocker()


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "repo"
    (root / "lockfiles").mkdir(parents=True)
    name = f"fe-{uuid.uuid4().hex[:6]}"
    write_image(root, name, SPEC, FILES)
    assert run_in_process(["lock", name], root).returncode == 0
    (root / "name").write_text(name)
    settled(root)
    return root


def settled(root: Path) -> None:
    """Every file of the workspace as if written a minute ago: a time stamp of the last seconds
    cannot tell a later edit apart (state/memo.py), so the memo would not trust it."""
    past = time.time() - 60
    for path in [root, *root.rglob("*")]:
        os.utime(path, (past, past), follow_symlinks=False)


def image(on, ws: Path, *extra: str, env: dict | None = None) -> str:
    env = {"ENGINEBUILD_DEBUG": "1", **(env or {})}
    name = (ws / "name").read_text()
    proc = on.run(["image", name, *extra], ws, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def ref(ws: Path) -> str:
    return f"enginebuild/{(ws / 'name').read_text()}:latest"


def folder(ws: Path) -> Path:
    return ws / "images" / (ws / "name").read_text()


def full_build_id(on, ws: Path, tmp_path: Path) -> str:
    """The image ID a full build gives from nothing: a new home (store, memo), so every layer is
    written again; the tags end up on the same image only if every byte agrees."""
    out = image(on, ws, env={"ENGINEBUILD_HOME": str(tmp_path / f"home-{uuid.uuid4().hex[:6]}")})
    assert FAST not in out
    return on.inspect(ref(ws))["Id"]


def test_an_edit_writes_only_its_layer_without_a_builder_and_equals_a_full_build(ws, on, tmp_path):
    edit_equals_full_build(on, ws, tmp_path)


def test_an_edit_loaded_into_docker_is_the_image_a_full_build_gives_there(ws, dock, tmp_path):
    edit_equals_full_build(dock, ws, tmp_path)


def edit_equals_full_build(on, ws: Path, tmp_path: Path) -> None:
    image(on, ws)
    again = image(on, ws, env=NO_BUILDER)  # the files were written seconds ago: hashed again, all the same
    assert "nothing to build" in again, again
    before = on.inspect(ref(ws))
    os.utime(folder(ws) / "scripts/a.sh", (1, 1))  # a touch alone changes nothing
    assert "nothing to build" in image(on, ws, env=NO_BUILDER)

    (folder(ws) / "scripts/a.sh").write_text("#!/bin/sh\necho tuned\n")
    (folder(ws) / "secret.conf").write_text("k=tuned\n")  # its mode is the spec's: stays 0600
    (folder(ws) / "conf/models/qwen.json").write_text("{\"tp\": 2}\n")
    (folder(ws) / "scripts/b.sh").chmod(0o644)  # only a mode
    out = image(on, ws, env=NO_BUILDER)
    assert FAST in out and "wrote 3 layer(s)" in out, out  # the glob is one layer
    after = on.inspect(ref(ws))
    assert after["Id"] != before["Id"]
    assert after["Config"] == before["Config"]
    old, new = before["RootFS"]["Layers"], after["RootFS"]["Layers"]
    assert len(old) == len(new) and sum(a != b for a, b in zip(old, new, strict=True)) == 3
    files = on.filesystem(ref(ws))
    assert files["opt/app/bin/b.sh"][1] == "0o644" and files["opt/app/bin/a.sh"][1] == "0o755"
    assert files["etc/app-secret.conf"][1] == "0o600"
    import hashlib

    assert files["etc/app/models/qwen.json"][4] == hashlib.sha256(b"{\"tp\": 2}\n").hexdigest()
    history = on.history(ref(ws))
    assert sum("enginebuild: files " in h for h in history) == 4
    assert full_build_id(on, ws, tmp_path) == after["Id"]
    assert image(on, ws, "-v").count("nothing to build") == 1  # and the full plan agrees it is up to date


def test_an_editor_that_saves_by_rename_still_takes_the_file_edit_path(ws, on, tmp_path):
    image(on, ws)
    script = folder(ws) / "run.sh"
    tmp = script.with_name(".run.sh.swp")
    tmp.write_text("#!/bin/sh\nexec serve --port 8000\n")
    tmp.chmod(0o755)
    tmp.rename(script)  # a new inode, and the folder's time stamp moves
    out = image(on, ws, env=NO_BUILDER)
    assert FAST in out and "wrote 1 layer(s)" in out, out
    assert full_build_id(on, ws, tmp_path) == on.inspect(ref(ws))["Id"]


def test_a_file_added_to_a_copied_glob_or_folder_goes_the_full_way(ws, on):
    image(on, ws)
    (folder(ws) / "scripts/c.sh").write_text("#!/bin/sh\necho c\n")
    out = image(on, ws)
    assert FAST not in out and "wrote 1 layer(s)" in out, out
    (folder(ws) / "conf/models/llama.json").write_text("{}\n")
    out = image(on, ws)
    assert FAST not in out
    files = on.filesystem(ref(ws))
    assert "opt/app/bin/c.sh" in files and "etc/app/models/llama.json" in files
    (folder(ws) / "scripts/notes.txt").write_text("edited, still not copied\n")  # the glob lists the same files
    (folder(ws) / "scripts/a.sh").write_text("#!/bin/sh\necho a2\n")
    assert FAST in image(on, ws, env=NO_BUILDER)


def test_a_spec_change_goes_the_full_way(ws, on):
    image(on, ws)
    spec = folder(ws) / "image.yaml"
    spec.write_text(spec.read_text().replace("/opt/app}", "/srv/app}"))
    (folder(ws) / "run.sh").write_text("#!/bin/sh\nexec serve --again\n")
    out = image(on, ws)
    assert FAST not in out
    assert "APP_HOME=/srv/app" in on.inspect(ref(ws))["Config"]["Env"]


def test_a_removed_file_goes_the_full_way_and_is_named(ws, on):
    image(on, ws)
    (folder(ws) / "run.sh").unlink()
    proc = on.run(["image", (ws / "name").read_text()], ws)
    assert proc.returncode == 2 and "run.sh" in proc.stderr, proc.stderr


def test_steps_are_not_run_again_for_a_file_edit_and_a_changed_step_goes_through_the_builder(ws, dock,
                                                                                              debian_reachable):
    on = dock
    spec = folder(ws) / "image.yaml"
    spec.write_text(spec.read_text() + dedent("""
        system:
          install: extract
          packages: [busybox-static]
          run: [["/bin/busybox", "--install", "-s", "/bin"]]
        steps:
          - {name: mark, run: "echo one > /etc/mark"}
        """))
    assert on.run(["lock", (ws / "name").read_text()], ws).returncode == 0
    settled(ws)
    image(on, ws)
    (folder(ws) / "run.sh").write_text("#!/bin/sh\nexec serve --edited\n")
    out = image(on, ws, env=NO_BUILDER)  # steps run below the files: an edit never runs them again
    assert FAST in out and "wrote 1 layer(s)" in out, out
    spec.write_text(spec.read_text().replace("echo one", "echo two"))
    refused = on.run(["image", (ws / "name").read_text()], ws, env=NO_BUILDER)
    assert refused.returncode != 0 and FAST not in refused.stdout
    out = image(on, ws)
    assert "ran 1 command layer(s)" in out, out
    from helpers.docker import read_file

    assert read_file(ref(ws), "/etc/mark") == b"two\n"
    assert read_file(ref(ws), "/opt/app/run.sh") == b"#!/bin/sh\nexec serve --edited\n"


@pytest.mark.registry
def test_an_edit_built_and_pushed_in_one_command_uploads_one_layer(ws, dock, registry):
    on = dock
    repo = f"{registry.host}/fast-edit-{uuid.uuid4().hex[:6]}"
    image(on, ws, "--push", "--to", repo, "--push-tag", "one")
    (folder(ws) / "scripts/a.sh").write_text("#!/bin/sh\necho pushed\n")
    out = image(on, ws, "--push", "--to", repo, "--push-tag", "two")
    assert FAST in out, out
    pushes = json.loads((ws / f"lockfiles/{(ws / 'name').read_text()}.pushes.json").read_text())["pushes"]
    record = next(r for r in pushes if r["tag"] == "two")
    assert record["layers_pushed"] == 1, record
    pulled = f"{repo}:two"
    docker("pull", "-q", pulled)
    try:
        assert on.inspect(pulled)["RootFS"]["Layers"] == on.inspect(ref(ws))["RootFS"]["Layers"]
    finally:
        on.untag(pulled)


def paused_build(ws: Path, home: Path, change) -> subprocess.CompletedProcess:
    """`image` stopped at the named point after planning while `change()` edits the workspace; the
    edited file is dated a minute back, as an edit early in a long build would be."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
           "ENGINEBUILD_FAULT": "image.planned=wait"}
    announced = home / "faults/image.planned"
    announced.unlink(missing_ok=True)
    build = subprocess.Popen([sys.executable, "-m", "enginebuild", "image", (ws / "name").read_text()], cwd=ws,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not announced.exists():
        assert build.poll() is None and time.monotonic() < deadline, build.communicate()
        time.sleep(0.05)
    edited = change()
    past = time.time() - 60
    os.utime(edited, (past, past))
    announced.unlink()
    out, err = build.communicate(timeout=300)
    return subprocess.CompletedProcess(build.args, build.returncode, out, err)


def test_a_copied_file_edited_while_a_build_runs_fails_that_build_and_the_next_run_builds_it(ws, dock,
                                                                                              eb_home):
    on = dock
    script = folder(ws) / "run.sh"
    script.write_text(f"#!/bin/sh\nexec serve --first {uuid.uuid4().hex}\n")  # a layer no store has
    settled(ws)
    late = f"#!/bin/sh\nexec serve --late {uuid.uuid4().hex}\n".encode()
    proc = paused_build(ws, eb_home, lambda: script.write_bytes(late) and script)  # hashed already
    assert proc.returncode == 1 and "run.sh changed while the build ran" in proc.stderr, proc.stdout + proc.stderr
    assert on.image_id(ref(ws)) is None  # no image whose key names other bytes
    assert "nothing to build" not in image(on, ws)
    from helpers.docker import read_file

    assert read_file(ref(ws), "/opt/app/run.sh") == late


def test_a_spec_edited_while_a_build_runs_is_built_by_the_next_run(ws, dock, eb_home):
    on = dock
    spec = folder(ws) / "image.yaml"
    proc = paused_build(ws, eb_home, lambda: spec.write_text(spec.read_text().replace("/opt/app}", "/srv/app}"))
                        and spec)
    assert proc.returncode == 0, proc.stderr
    assert "APP_HOME=/opt/app" in on.inspect(ref(ws))["Config"]["Env"]  # read before the edit
    image(on, ws, env=NO_BUILDER)  # a new config only: no layer to write
    assert "APP_HOME=/srv/app" in on.inspect(ref(ws))["Config"]["Env"]


def test_a_copied_file_swapped_for_a_symlink_to_a_host_file_is_refused_not_copied(ws, on, tmp_path):
    image(on, ws)
    secret = tmp_path / "host-credentials.json"
    secret.write_text('{"auths": {"ghcr.io": {"auth": "c2VjcmV0"}}}\n')
    script = folder(ws) / "run.sh"
    script.unlink()
    script.symlink_to(secret)
    name = (ws / "name").read_text()
    for _ in range(2):  # and the run after it does not call it up to date either
        proc = on.run(["image", name], ws, env={"ENGINEBUILD_DEBUG": "1"})
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert FAST not in proc.stdout and "nothing to build" not in proc.stdout
        assert "resolves outside the recipe repository" in proc.stderr
    import hashlib

    assert on.filesystem(ref(ws))["opt/app/run.sh"][4] == hashlib.sha256(FILES["run.sh"].encode()).hexdigest()


def test_t_tags_the_built_image_as_docker_build_does_even_when_nothing_changed(ws, on):
    image(on, ws)
    name = (ws / "name").read_text()
    proc = on.run(["image", name, "-t", f"mine/{name}:v1", "--tag", f"mine/{name}"], ws)
    assert proc.returncode == 0 and "nothing to build" in proc.stdout  # nothing to build: tagged all the same
    assert f"tagged mine/{name}:v1, mine/{name}:latest" in proc.stderr, proc.stderr
    out = proc.stdout
    ours = on.image_id(ref(ws))
    for tag in (f"mine/{name}:v1", f"mine/{name}:latest"):
        assert on.image_id(tag) == ours, out
        on.untag(tag)
    bad = on.run(["image", name, "-t", "Bad Name"], ws)
    assert bad.returncode == 2 and "-t 'Bad Name'" in bad.stderr



def test_enginebuild_yaml_tags_are_given_by_every_build_and_kept_by_the_no_op(ws, on):
    name = (ws / "name").read_text()
    (ws / "enginebuild.yaml").write_text('tags: ["recipes/{image}:dev"]\n')
    image(on, ws)
    ours = on.image_id(ref(ws))
    assert on.image_id(f"recipes/{name}:dev") == ours
    on.untag(f"recipes/{name}:dev")
    image(on, ws)  # nothing changed, but a tag it gives is gone: given again
    assert on.image_id(f"recipes/{name}:dev") == ours
    on.untag(f"recipes/{name}:dev")
    (ws / "enginebuild.yaml").write_text('tags: ["recipes/fixed:dev"]\n')
    bad = on.run(["image", name], ws)
    assert bad.returncode == 2 and "enginebuild.yaml:1: tags[0]" in bad.stderr and "{image}" in bad.stderr, bad.stderr


def test_a_t_tag_stays_on_the_image_it_named_when_later_builds_go_without_it(ws, on):
    """`docker build -t` tags once: a release tag never follows a later build, no-op, file edit or full."""
    name = (ws / "name").read_text()
    release = f"mine/{name}:rel"
    tagged = on.run(["image", name, "-t", release], ws)
    assert tagged.returncode == 0, tagged.stderr
    first = on.inspect(release)["Id"]
    again = image(on, ws)  # a no-op without -t reports and checks the image's own tags only
    assert release not in again and f"-> {ref(ws)}" in again
    (folder(ws) / "run.sh").write_text("#!/bin/sh\nexec serve --port 9000\n")
    edited = image(on, ws)  # the file-edit path
    assert FAST in edited and release not in edited
    assert on.inspect(release)["Id"] == first != on.inspect(ref(ws))["Id"]
    (folder(ws) / "image.yaml").write_text(SPEC.replace("fast-edit", "full-way"))
    full = image(on, ws)  # the full path
    assert FAST not in full and release not in full
    assert on.inspect(release)["Id"] == first != on.inspect(ref(ws))["Id"]
    on.untag(release)


def test_a_copied_file_turned_into_a_binary_goes_the_full_way_and_its_libraries_are_checked(ws, on):
    from helpers.elfmake import make_elf

    image(on, ws)
    (folder(ws) / "scripts/a.sh").write_bytes(make_elf(needed=("libenginebuild-absent.so.9",)))
    name = (ws / "name").read_text()
    proc = on.run(["image", name], ws, env={"ENGINEBUILD_DEBUG": "1"})
    assert FAST not in proc.stdout
    assert "file-edit path not taken" in proc.stdout and "is a binary: the full path checks what it loads" in \
        proc.stdout, proc.stdout
    assert proc.returncode == 1
    assert "MISSING libenginebuild-absent.so.9, needed by /opt/app/bin/a.sh" in proc.stderr, proc.stderr


@pytest.mark.parametrize("said", [["-q"], ["--locked"], ["--frozen"], ["--progress=plain"], ["--progress", "quiet"],
                                  ["--locked", "-q"]])
def test_options_that_do_not_change_the_image_keep_the_no_op_and_the_file_edit_paths(ws, on, said):
    image(on, ws)  # (the workspace's files were written a minute ago: the memo trusts their stats)
    out = image(on, ws, *said, env=NO_BUILDER)  # the no-op: no plan, no builder
    assert "nothing to build" in out and "is up to date" in out, out
    script = folder(ws) / "run.sh"
    script.write_text("#!/bin/sh\nexec serve --edited\n")
    past = time.time() - 60
    os.utime(script, (past, past))
    out = image(on, ws, *said, env=NO_BUILDER)
    assert FAST in out, out  # the file-edit path (what it writes is checked against a full build above)


def test_a_change_to_the_config_alone_says_so(ws, on):
    image(on, ws)
    before = on.inspect(ref(ws))["Id"]
    spec = folder(ws) / "image.yaml"
    spec.write_text(spec.read_text().replace("labels: {org.example.recipe: fast-edit}",
                                             "labels: {org.example.recipe: fast-edit, org.example.tier: gold}"))
    out = image(on, ws)
    assert "only the image's config changed" in out and "nothing to build" not in out, out
    assert on.inspect(ref(ws))["Id"] != before
    assert on.inspect(ref(ws))["Config"]["Labels"]["org.example.tier"] == "gold"
    out = image(on, ws)
    assert "nothing to build" in out  # and the next run has nothing to say but that


def test_an_image_of_layers_made_before_but_not_the_same_ones_says_so(ws, on):
    """A spec change that drops a `files:` entry makes no layer: what changed is which layers the
    image has, not its config, and the build says that rather than "only the config"."""
    image(on, ws)
    spec = folder(ws) / "image.yaml"
    spec.write_text(spec.read_text().replace('  /etc/app-secret.conf: {src: secret.conf, mode: "0600"}\n', ""))
    out = image(on, ws)
    assert "no layer made: a new image of layers made before (not those of the image it replaces" in out, out
    assert "only the image's config changed" not in out, out
    files = on.filesystem(ref(ws))
    assert "etc/app-secret.conf" not in files and "opt/app/run.sh" in files


def test_each_answer_of_image_comes_from_the_one_decision_that_plan_shows(ws, on):
    name = (ws / "name").read_text()

    def plan_says() -> str:
        proc = on.run(["plan", name], ws)
        assert proc.returncode == 0, proc.stderr
        return next(line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("image now: "))

    assert plan_says() == "image now: rebuild: no finished build of it with these options is recorded"
    proc = on.run(["image", name], ws)
    assert proc.returncode == 0 and f"{name}: rebuild" not in proc.stderr, proc.stderr  # a first build: nothing to say
    assert plan_says() == "image now: up to date"
    script = folder(ws) / "run.sh"
    script.write_text("#!/bin/sh\nexec serve --edited\n")
    past = time.time() - 60
    os.utime(script, (past, past))
    assert plan_says() == "image now: files edited: run.sh"
    assert FAST in image(on, ws, env=NO_BUILDER)
    # the record the decision reads, changed: the no-op no longer answers, and the full build says why
    memo = next(p for p in (Path(os.environ["ENGINEBUILD_HOME"]) / "plans").iterdir() if p.name.startswith(name))
    doc = json.loads(memo.read_text())
    doc["result"]["images"][0]["id"] = "sha256:" + "0" * 64
    memo.write_text(json.dumps(doc))
    why = plan_says().removeprefix("image now: ")
    assert re.fullmatch(f"rebuild: the engine does not hold enginebuild/{name}:latest(-[a-z0-9]+)? as last built", why)
    proc = on.run(["image", name], ws)
    assert proc.returncode == 0 and f"{name}: {why}" in proc.stderr, proc.stderr
    assert "nothing to build, every platform is up to date" not in proc.stdout
    assert plan_says() == "image now: up to date"
