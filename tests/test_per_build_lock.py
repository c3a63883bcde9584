"""`--set` of a pinned input (a git ref, a package version, a base) builds: the changed inputs are
resolved for that run into a lock of its own in the store, as `docker build --build-arg REF=…`
builds another ref; the committed lock is not touched, and plan, render and image read the same
per-build lock."""
from __future__ import annotations

import json

from conftest import run_cli
from helpers.docker import docker, read_file
from helpers.gitrepo import Repo
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
    assert run_cli(["lock", "t"], workspace).returncode == 0
    committed = (workspace / "lockfiles/t.lock").read_bytes()
    home = tmp_path / "home"
    env = {"ENGINEBUILD_HOME": str(home)}
    setting = ["--set", "components.engine.source.git.ref=v2"]
    plan = run_cli(["plan", "t", *setting, "--json"], workspace, env=env)
    assert plan.returncode in (0, 1), plan.stderr
    assert "--set changes components.engine.source: resolved for this build into" in plan.stderr
    per_build = next(home.joinpath("locks").glob("t-*.lock"))
    pinned = json.loads(per_build.read_text())["inputs"]["components.engine.source"]["resolved"]
    assert pinned["commit"] == two
    assert (workspace / "lockfiles/t.lock").read_bytes() == committed  # never written
    render = run_cli(["render", "t", *setting], workspace, env=env)
    assert render.returncode == 0, render.stderr
    assert two[:12] in render.stdout


def test_image_with_set_of_a_git_ref_builds_that_ref(workspace, tmp_path, git_available, docker_engine,
                                                      debian_reachable):
    repo = Repo(tmp_path / "upstream")
    repo.commit({"VERSION": "1\n"}, "one", tag="v1")
    repo.commit({"VERSION": "2\n"}, "two", tag="v2")
    write_image(workspace, "t", _spec(repo.url), {"build.sh": BUILD})
    assert run_cli(["lock", "t"], workspace).returncode == 0
    committed = (workspace / "lockfiles/t.lock").read_bytes()
    proc = run_cli(["image", "t", "--set", "components.engine.source.git.ref=v2", "-t", "enginebuild/t:v2"],
                   workspace)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "resolved for this build into" in proc.stderr
    assert read_file("enginebuild/t:v2", "/opt/engine/VERSION") == b"2\n"
    assert (workspace / "lockfiles/t.lock").read_bytes() == committed
    proc = run_cli(["image", "t"], workspace)  # the committed lock's ref, as before
    assert proc.returncode == 0, proc.stderr
    assert read_file("enginebuild/t:latest", "/opt/engine/VERSION") == b"1\n"
    frozen = run_cli(["image", "t", "--frozen", "--set", "components.engine.source.git.ref=v2"], workspace)
    assert frozen.returncode == 1 and "which --frozen will not resolve" in frozen.stderr
    docker("rmi", "-f", "enginebuild/t:v2", "enginebuild/t:latest", check=False)
