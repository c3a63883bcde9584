"""Resolvers against the real services: PyPI's JSON API, Debian's archive, git repositories."""
import json
import subprocess

import pytest
from conftest import run_cli
from helpers.specs import write_image

from helpers import report

from enginebuild.errors import ResolveError
from enginebuild.fetch import Fetcher
from enginebuild.http import Http
from enginebuild.lockfile import read_lock
from enginebuild.resolve.debian import DebianArchive
from enginebuild.resolve.gitsource import Mirror
from enginebuild.resolve.pypi import PyPI, target_tags
from enginebuild.store import Store, sha256_file

SIX_WHEEL_SHA256 = "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"
TURBOQUANT_SDIST_SHA256 = "5aabf0fc271db6494b85bbc24080835ddd71492966743713d0b912179b02a04d"


@pytest.mark.network
def test_requirements_resolve_to_exact_versions_and_sha256_from_pypi(pypi_reachable, workspace, eb_home):
    write_image(workspace, "t", """
        base: scratch
        platform: linux/arm64
        python:
          version: "3.12"
          requirements: ["six==1.16.0", "numpy>=2.0,<2.1"]
        """)
    proc = run_cli(["lock", "t"], workspace)
    assert proc.returncode == 0, proc.stderr
    files = {f["name"]: f for f in read_lock(workspace, "t").resolved("python")["files"]}
    assert files["six"]["sha256"] == SIX_WHEEL_SHA256
    assert files["numpy"]["version"] == "2.0.2"
    assert files["numpy"]["filename"].endswith("manylinux2014_aarch64.whl")
    assert files["numpy"]["url"].startswith("https://")


@pytest.mark.network
def test_an_sdist_pin_is_its_real_sha256_and_fetching_it_twice_downloads_once(pypi_reachable, workspace, eb_home):
    write_image(workspace, "t", """
        base: scratch
        platform: linux/amd64
        engine:
          name: turboquant
          source:
            pypi: {version: 0.2.0}
        """)
    assert run_cli(["lock", "t"], workspace).returncode == 0
    engine = read_lock(workspace, "t").resolved("engine")
    assert engine["sha256"] == TURBOQUANT_SDIST_SHA256 and engine["filename"] == "turboquant-0.2.0.tar.gz"
    first = run_cli(["fetch", "t"], workspace)
    second = run_cli(["fetch", "t"], workspace)
    assert first.returncode == 0 and second.returncode == 0
    assert "t: 0 fetched, 1 already in the store" in second.stdout
    assert sha256_file(Store(eb_home).path(TURBOQUANT_SDIST_SHA256)) == TURBOQUANT_SDIST_SHA256


@pytest.mark.network
def test_a_fetched_file_that_no_longer_matches_its_pin_is_refused_and_deleted(pypi_reachable, workspace, eb_home):
    lock_text = json.dumps({
        "enginebuild-lock": 1, "image": "t", "created": "2026-01-01T00:00:00Z",
        "inputs": {"python": {"request": {}, "resolved": {"files": [{
            "name": "six", "version": "1.16.0", "filename": "six-1.16.0-py2.py3-none-any.whl",
            "url": "https://files.pythonhosted.org/packages/d9/5a/e7c31adbe875f2abbb91bd84cf2dc52d792b5a01506781dbcf25c91daf11/six-1.16.0-py2.py3-none-any.whl",
            "sha256": "0" * 64}]}}}})
    (workspace / "lockfiles/t.lock").write_text(lock_text)
    fetcher = Fetcher(eb_home, read_lock(workspace, "t"), Http())
    from enginebuild.context import ContextItem
    from enginebuild.errors import FetchError
    with pytest.raises(FetchError) as info:
        fetcher.fetch([ContextItem("python/six.whl", "0" * 64, artifact="0" * 64)])
    assert "the lock pins 0000" in info.value.message
    assert not Store(eb_home).has("0" * 64)
    report.count("upstream integrity", "downloads not matching their pin refused")


def test_wheels_are_chosen_for_the_target_platform_not_the_host():
    tags = target_tags("3.12", "arm64")
    assert str(tags[0]).startswith("cp312-cp312-manylinux_2_39_aarch64")
    assert all("x86_64" not in str(t) for t in tags)


@pytest.mark.network
def test_a_missing_release_is_a_clear_resolve_error(pypi_reachable):
    with pytest.raises(ResolveError) as info:
        PyPI(Http()).resolve_sdist("turboquant", "9.9.9")
    assert info.value.message == "PyPI has no release 9.9.9 of turboquant"


@pytest.mark.network
def test_debian_packages_resolve_with_their_closure_from_the_signed_index(debian_reachable):
    archive = DebianArchive(Http(), "http://deb.debian.org/debian", "bookworm", ("main",), "amd64")
    archive.load()
    assert archive.signature in (True, None)
    closure = {p["name"]: p for p in archive.closure(("busybox-static",), skip_required=False)}
    assert list(closure) == ["busybox-static"]
    assert closure["busybox-static"]["filename"].startswith("pool/main/b/busybox/busybox-static_")
    gcc = {p["name"] for p in archive.closure(("gcc",), skip_required=False)}
    assert {"gcc-12", "cpp-12", "binutils", "libc6"} <= gcc
    assert "libc6" not in {p["name"] for p in archive.closure(("gcc",), skip_required=True)}


# -- git: small local repositories served over file:// -------------------------------------------

def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                               "HOME": str(cwd), "PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.fixture
def upstream(tmp_path, git_available):
    repo = tmp_path / "upstream"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "engine.c").write_text("int main(void) { return 0; }\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    git(repo, "tag", "-a", "v1.0", "-m", "release 1.0")
    first = git(repo, "rev-parse", "HEAD")
    (repo / "engine.c").write_text("int main(void) { return 1; }\n")
    git(repo, "commit", "-qam", "second")
    second = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "scratch-work")
    (repo / "engine.c").write_text("int main(void) { return 2; }\n")
    git(repo, "commit", "-qam", "unpublished")
    dangling = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "scratch-work")
    return {"url": f"file://{repo}", "first": first, "second": second, "dangling": dangling}


def test_git_refs_resolve_to_full_commits(upstream, eb_home):
    mirror = Mirror(eb_home, upstream["url"])
    assert mirror.resolve("main") == upstream["second"]
    assert mirror.resolve("v1.0") == upstream["first"]  # an annotated tag, peeled to its commit
    assert mirror.resolve(upstream["first"][:9]) == upstream["first"]
    assert mirror.resolve(upstream["first"]) == upstream["first"]


def test_a_commit_reachable_from_no_branch_or_tag_is_refused(upstream, eb_home):
    with pytest.raises(ResolveError) as info:
        Mirror(eb_home, upstream["url"]).resolve(upstream["dangling"])
    assert "not reachable from any branch or tag" in info.value.message or "has no commit" in info.value.message
    report.count("upstream integrity", "unreachable commits refused")


def test_an_unknown_ref_is_a_clear_error(upstream, eb_home):
    with pytest.raises(ResolveError) as info:
        Mirror(eb_home, upstream["url"]).resolve("v9.9")
    assert info.value.message == f"{upstream['url']} has no branch or tag named 'v9.9'"


def test_a_git_source_is_exported_at_its_commit_without_a_checkout(upstream, eb_home):
    import io
    import tarfile

    data = Mirror(eb_home, upstream["url"]).archive(upstream["first"], "engine")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.extractfile("engine/engine.c").read() == b"int main(void) { return 0; }\n"


def test_lock_pins_a_git_engine_to_a_full_commit(upstream, workspace):
    write_image(workspace, "t", f"""
        base: scratch
        platform: linux/amd64
        engine:
          name: e
          source:
            git: {{url: "{upstream['url']}", ref: v1.0}}
        """)
    proc = run_cli(["lock", "t"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert read_lock(workspace, "t").resolved("engine")["commit"] == upstream["first"]
