"""`--set` of a pinned input (a git ref, a package version, a base) builds: the changed inputs are
resolved for that run into a lock of its own in the store, as `docker build --build-arg REF=…`
builds another ref; the committed lock is not touched, and plan, render and image read the same
per-build lock."""
from __future__ import annotations

import json

from helpers.docker import docker, read_file
from helpers.gitrepo import Repo
from helpers.inprocess import run_in_process
from helpers.specs import BUSYBOX_BUILDER, write_image


def _spec(url: str) -> str:
    return BUSYBOX_BUILDER + f"""
components:
  engine:
    source:
      git: {{url: "{url}", ref: v1}}
    build: {{script: build.sh}}
    outputs: {{paths: [/opt/engine]}}
install: [engine]
"""


BUILD = "#!/bin/sh\nset -e\nmkdir -p /opt/engine\ncp VERSION /opt/engine/VERSION\n"


def test_set_of_a_git_ref_is_resolved_into_a_lock_of_its_own(workspace, tmp_path, git_available, debian_reachable):
    repo = Repo(tmp_path / "upstream")
    repo.commit({"VERSION": "1\n"}, "one", tag="v1")
    two = repo.commit({"VERSION": "2\n"}, "two", tag="v2")
    write_image(workspace, "t", _spec(repo.url), {"build.sh": BUILD})
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    committed = (workspace / "lockfiles/t.lock").read_bytes()
    home = tmp_path / "home"
    env = {"ENGINEBUILD_HOME": str(home)}
    setting = ["--set", "components.engine.source.git.ref=v2"]
    plan = run_in_process(["plan", "t", *setting, "--json"], workspace, env=env)
    assert plan.returncode in (0, 1), plan.stderr
    assert "--set changes components.engine.source: resolved for this build into" in plan.stderr
    per_build = next(home.joinpath("locks").glob("t-*.lock"))
    pinned = json.loads(per_build.read_text())["inputs"]["components.engine.source"]["resolved"]
    assert pinned["commit"] == two
    assert (workspace / "lockfiles/t.lock").read_bytes() == committed  # never written
    render = run_in_process(["render", "t", *setting], workspace, env=env)
    assert render.returncode == 0, render.stderr
    assert two[:12] in render.stdout


def test_image_with_set_of_a_git_ref_builds_that_ref(workspace, tmp_path, git_available, docker_engine,
                                                      debian_reachable):
    repo = Repo(tmp_path / "upstream")
    repo.commit({"VERSION": "1\n"}, "one", tag="v1")
    repo.commit({"VERSION": "2\n"}, "two", tag="v2")
    write_image(workspace, "t", _spec(repo.url), {"build.sh": BUILD})
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    committed = (workspace / "lockfiles/t.lock").read_bytes()
    proc = run_in_process(["image", "t", "--set", "components.engine.source.git.ref=v2", "-t", "enginebuild/t:v2"],
                   workspace)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "resolved for this build into" in proc.stderr
    assert read_file("enginebuild/t:v2", "/opt/engine/VERSION") == b"2\n"
    assert (workspace / "lockfiles/t.lock").read_bytes() == committed
    # a push without the --set the build was given is told which one it lacks
    pushed = run_in_process(["push", "t", "--to", "127.0.0.1:9/x/t"], workspace)
    assert pushed.returncode == 1, pushed.stderr
    assert "its last build here was given --set components.engine.source.git.ref=v2" in pushed.stderr, pushed.stderr
    assert "push t --set components.engine.source.git.ref=v2 --to 127.0.0.1:9/x/t" in pushed.stderr
    proc = run_in_process(["image", "t"], workspace)  # the committed lock's ref, as before
    assert proc.returncode == 0, proc.stderr
    assert read_file("enginebuild/t:latest", "/opt/engine/VERSION") == b"1\n"
    frozen = run_in_process(["image", "t", "--frozen", "--set", "components.engine.source.git.ref=v2"], workspace)
    assert frozen.returncode == 1 and "which --frozen will not resolve" in frozen.stderr
    docker("rmi", "-f", "enginebuild/t:v2", "enginebuild/t:latest", check=False)


def test_one_set_gives_one_resolution_that_every_command_shares_and_gc_collects(workspace, tmp_path, git_available,
                                                                                debian_reachable):
    """`plan` then `render` (or `image`) of the same `--set` read the one resolution made first:
    a tag moved between them changes nothing, and no second lock piles up. Once the committed lock
    changes, `gc` removes it."""
    repo = Repo(tmp_path / "upstream")
    repo.commit({"VERSION": "1\n"}, "one", tag="v1")
    first = repo.commit({"VERSION": "2\n"}, "two", tag="rc")
    write_image(workspace, "t", _spec(repo.url), {"build.sh": BUILD})
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    env = {"ENGINEBUILD_HOME": str(tmp_path / "home")}
    setting = ["--set", "components.engine.source.git.ref=rc"]
    plan = run_in_process(["plan", "t", *setting, "--json"], workspace, env=env)
    assert "resolved for this build into" in plan.stderr, plan.stderr
    moved = repo.commit({"VERSION": "3\n"}, "three")
    repo.git("tag", "-f", "rc", moved)  # the tag moves between plan and the next command
    render = run_in_process(["render", "t", *setting], workspace, env=env)
    assert render.returncode == 0, render.stderr
    assert "the resolution made for it earlier is used" in render.stderr, render.stderr
    assert first[:12] in render.stdout and moved[:12] not in render.stdout
    locks = list((tmp_path / "home/locks").glob("t-*.lock"))
    assert len(locks) == 1, locks
    dry = json.loads(run_in_process(["gc", "--dry-run", "--json"], workspace, env=env).stdout)
    assert dry["build_locks"] == []  # made over the committed lock that is there: kept
    (workspace / "images/t/image.yaml").write_text(_spec(repo.url).replace("ref: v1", "ref: rc"))
    assert run_in_process(["lock", "t"], workspace).returncode == 0  # the committed lock changes
    done = run_in_process(["gc"], workspace, env=env)
    assert done.returncode == 0 and "1 per-build lock(s) of --set over an older committed lock" in done.stdout, \
        done.stdout + done.stderr
    assert not list((tmp_path / "home/locks").glob("t-*.lock"))


def test_a_set_of_an_input_the_committed_lock_leaves_unresolved_is_not_said_resolved(workspace, tmp_path,
                                                                                   git_available, debian_reachable):
    """The committed lock could not reach the source (it stays unresolved); a --set of its ref
    cannot either: said so, naming the input, never "resolved for this build"."""
    write_image(workspace, "t", _spec(f"file://{tmp_path}/nowhere.git"), {"build.sh": BUILD})
    run_in_process(["lock", "t"], workspace)  # written, with the source left unresolved
    assert "components.engine.source" in json.loads((workspace / "lockfiles/t.lock").read_text())["inputs"]
    proc = run_in_process(["plan", "t", "--set", "components.engine.source.git.ref=v2"], workspace)
    assert proc.returncode != 0
    assert "components.engine.source could not be resolved for this build (the committed lock leaves it unresolved " \
           "too)" in proc.stderr, proc.stderr
    assert "resolved for this build into" not in proc.stderr
