"""Git sources fetched from a mirror (a bundle, as ../shared/mirrors holds; a repository on this
machine), with a local repository standing for upstream: the mirror's tree is upstream's, an
upstream out of reach is not needed, the lock written through the mirror is the one written from
upstream (it names upstream's URL and commit), and a mirror that lacks the pinned commit or names
another commit for the pinned tag is refused, naming the mirror."""
from __future__ import annotations

import json
import subprocess

import pytest

from enginebuild.errors import ResolveError
from helpers.gitrepo import ENV as REPO_ENV
from helpers.inprocess import run_in_process
from helpers.specs import write_image

NO_DOCKER = {"ENGINEBUILD_DOCKER": "/bin/false", "DOCKER_HOST": "unix:///nonexistent.sock"}
ENV = {**REPO_ENV, "GIT_ALLOW_PROTOCOL": "file"}
SPEC = """base: scratch
platform: linux/amd64
components:
  e:
    source: {{git: {{url: "{url}", ref: v1.0}}}}
    build: {{script: build.sh}}
    outputs: {{paths: [/x]}}
install: [e]
"""


def git(cwd, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**ENV, "HOME": str(cwd)}).stdout.strip()


@pytest.fixture
def upstream(tmp_path, git_available):
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "engine.c").write_text("int main(void) { return 0; }\n")
    (repo / "lib").mkdir()
    (repo / "lib" / "a.h").write_text("#define A 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    git(repo, "tag", "-a", "v1.0", "-m", "release 1.0")
    return repo


def bundle_of(repo, path):
    git(repo, "bundle", "create", str(path), "--all")
    return path


def lock(ws, env):
    proc = run_in_process(["lock", "t"], ws, env={**NO_DOCKER, **env})
    return proc, json.loads((ws / "lockfiles/t.lock").read_text())["inputs"]["components.e.source"]


def test_a_lock_through_a_bundle_is_the_lock_from_upstream_and_upstream_is_not_needed(upstream, tmp_path, workspace,
                                                                                    monkeypatch):
    url = f"file://{upstream}"
    write_image(workspace, "t", SPEC.format(url=url), {"build.sh": "#!/bin/sh\ntrue\n"})
    direct, pinned = lock(workspace, {"ENGINEBUILD_HOME": str(tmp_path / "h1")})
    assert direct.returncode == 0, direct.stderr
    bundle = bundle_of(upstream, tmp_path / "upstream.bundle")
    moved = tmp_path / "moved-away"
    upstream.rename(moved)  # upstream is out of reach from here on
    (workspace / "lockfiles/t.lock").unlink()
    mirrored, through = lock(workspace, {"ENGINEBUILD_HOME": str(tmp_path / "h2"),
                                         "ENGINEBUILD_GIT_MIRRORS": f"{url}={bundle}"})
    assert mirrored.returncode == 0, mirrored.stderr
    assert f"{url}: fetched from the mirror {bundle}" in mirrored.stderr
    assert through == pinned and through["resolved"]["url"] == url  # upstream's URL and commit
    # the tree a build receives through the mirror is upstream's, byte for byte
    mirror_tree = tree_of(url, through, tmp_path / "h2", f"{url}={bundle}", monkeypatch)
    moved.rename(upstream)
    assert mirror_tree == tree_of(url, pinned, tmp_path / "h1", None, monkeypatch)


def test_a_relative_mirror_path_is_taken_from_the_folder_it_was_given_in_on_a_fresh_home(upstream, tmp_path, workspace):
    """The README's form (`URL=../shared/mirrors/X.bundle`): git runs `ls-remote` in one folder and
    `fetch` inside the store's mirror, so a path left relative named two different places."""
    url = f"file://{upstream}"
    write_image(workspace, "t", SPEC.format(url=url), {"build.sh": "#!/bin/sh\ntrue\n"})
    (tmp_path / "mirrors").mkdir()
    bundle_of(upstream, tmp_path / "mirrors" / "up.bundle")
    upstream.rename(tmp_path / "moved-away")
    proc, pinned = lock(workspace, {"ENGINEBUILD_HOME": str(tmp_path / "fresh-home"),
                                    "ENGINEBUILD_GIT_MIRRORS": f"{url}=../mirrors/up.bundle"})
    assert proc.returncode == 0, proc.stderr
    assert f"fetched from the mirror {tmp_path / 'mirrors' / 'up.bundle'}" in proc.stderr
    assert pinned["resolved"]["url"] == url


def tree_of(url: str, pinned: dict, home, mirrors: str | None, monkeypatch, ref: str = "v1.0") -> str:
    """The sha256 of the tree tar a build of that pin receives (as the executor makes it)."""
    from enginebuild.settings import reset_settings
    from enginebuild.sources.base import Context
    from enginebuild.sources.git import KIND, GitRequest

    if mirrors:
        monkeypatch.setenv("ENGINEBUILD_GIT_MIRRORS", mirrors)
    else:
        monkeypatch.delenv("ENGINEBUILD_GIT_MIRRORS", raising=False)
    reset_settings()
    return KIND.tree_tar(GitRequest(url, ref), KIND.pin_from_json(pinned["resolved"]), Context(home)).sha256


def test_a_mirror_that_names_another_commit_for_the_pinned_tag_is_refused(upstream, tmp_path, workspace, monkeypatch):
    url = f"file://{upstream}"
    write_image(workspace, "t", SPEC.format(url=url), {"build.sh": "#!/bin/sh\ntrue\n"})
    proc, pinned = lock(workspace, {"ENGINEBUILD_HOME": str(tmp_path / "h1")})
    assert proc.returncode == 0, proc.stderr
    forged = tmp_path / "forged"
    git(tmp_path, "clone", "-q", str(upstream), str(forged))
    (forged / "engine.c").write_text("int main(void) { return 1; }\n")
    git(forged, "commit", "-qam", "another")
    git(forged, "tag", "-f", "-a", "v1.0", "-m", "not the release")
    bundle = bundle_of(forged, tmp_path / "forged.bundle")
    with pytest.raises(ResolveError) as refused:  # what a build or `patches check` asks for the pinned tree
        tree_of(url, pinned, tmp_path / "h2", f"{url}={bundle}", monkeypatch)
    assert f"the mirror {bundle} of {url} names commit" in refused.value.message
    assert f"for v1.0; the lock pins {pinned['resolved']['commit'][:12]}: refused" in refused.value.message


def test_a_mirror_that_lacks_the_pinned_commit_is_refused_naming_it(upstream, tmp_path, workspace, monkeypatch):
    url = f"file://{upstream}"
    write_image(workspace, "t", SPEC.format(url=url).replace("ref: v1.0", "ref: main"), {"build.sh": "#!/bin/sh\ntrue\n"})
    # (the spec names a branch: the mirror's older `main` would be refused first; asked by the commit
    # itself, as a spec that pins `commit:` asks, what is left is that the mirror lacks it)
    old = tmp_path / "old.bundle"
    bundle_of(upstream, old)  # before the commit the lock will pin
    (upstream / "engine.c").write_text("int main(void) { return 2; }\n")
    git(upstream, "commit", "-qam", "second")
    proc, pinned = lock(workspace, {"ENGINEBUILD_HOME": str(tmp_path / "h1")})
    assert proc.returncode == 0, proc.stderr
    with pytest.raises(ResolveError) as refused:
        tree_of(url, pinned, tmp_path / "h2", f"{url}={old}", monkeypatch, ref=pinned["resolved"]["commit"])
    assert refused.value.message == f"commit {pinned['resolved']['commit']} is not in {url} (from the mirror {old})"


def test_a_repository_on_this_machine_serves_as_a_mirror_from_enginebuild_yaml(upstream, tmp_path, workspace):
    url = "https://git.example.invalid/org/engine"  # a host that is nowhere
    copy = tmp_path / "mirrors" / "org" / "engine"
    git(tmp_path, "clone", "-q", "--bare", str(upstream), str(copy))
    write_image(workspace, "t", SPEC.format(url=url), {"build.sh": "#!/bin/sh\ntrue\n"})
    (workspace / "enginebuild.yaml").write_text(f"mirrors:\n  - upstream: https://git.example.invalid/\n"
                                                f"    at: {tmp_path}/mirrors/\n")
    proc, pinned = lock(workspace, {"ENGINEBUILD_HOME": str(tmp_path / "h")})
    assert proc.returncode == 0, proc.stderr
    assert pinned["resolved"] == {"commit": git(upstream, "rev-parse", "HEAD"), "url": url}
    assert f"{url}: fetched from the mirror {tmp_path}/mirrors/org/engine" in proc.stderr
    spec = workspace / "images/t/image.yaml"  # a builder with a shell, for `plan` (lock pinned it already)
    spec.write_text(spec.read_text().replace("base: scratch\n", "base: scratch\nbuilder:\n  base: scratch\n  system: "
                                             "{install: extract, packages: [busybox-static], run: "
                                             "[[/bin/busybox, --install, -s, /bin]]}\n", 1))
    plan = run_in_process(["plan", "t", "--unpinned"], workspace, env={**NO_DOCKER, "ENGINEBUILD_HOME": str(tmp_path / "h")})
    assert f"its source is fetched from the mirror {tmp_path}/mirrors/org/engine" in plan.stdout, plan.stdout
