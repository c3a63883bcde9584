"""Resolvers against the real services: PyPI's simple API, Debian's archive, git repositories."""

import json
import subprocess
import tarfile
import time

import pytest

from enginebuild.errors import ResolveError
from enginebuild.io.git import Mirror
from enginebuild.io.http import Http
from enginebuild.io.store import Store, sha256_file
from enginebuild.lock.debian import ArchiveSet, DebianArchive, compare_versions
from enginebuild.lock.lockfile import read_lock
from enginebuild.lock.python import target_tags
from enginebuild.recipe.catalog import Catalog
from enginebuild.recipe.model import Archive
from enginebuild.sources.base import Context
from enginebuild.sources.pypi import KIND as PYPI
from enginebuild.sources.pypi import PypiRequest
from helpers import report
from helpers.inprocess import run_in_process
from helpers.specs import write_image

TURBOQUANT_SDIST_SHA256 = "5aabf0fc271db6494b85bbc24080835ddd71492966743713d0b912179b02a04d"
COMPONENT = """
components:
  e:
    source: {source}
    build: {{script: build.sh}}
    outputs: {{paths: [/x]}}
install: [e]
"""
BUILD = {"build.sh": "#!/bin/sh\ntrue\n"}


def lock_of(workspace, name):
    return read_lock(workspace, Catalog(workspace).load(name))


BUILDER = """builder:
  base: scratch
  system: {install: extract, packages: [busybox-static], run: [["/bin/busybox", "--install", "-s", "/bin"]]}
"""


@pytest.mark.network
def test_an_sdist_pin_is_its_real_sha256_and_fetching_it_twice_downloads_once(pypi_reachable, debian_reachable,
                                                                                 workspace, eb_home):
    write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\n" + BUILDER +
                COMPONENT.format(source="{pypi: {name: turboquant, version: 0.2.0}}"), BUILD)
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    pin = lock_of(workspace, "t").raw("components.e.source")
    assert pin["sha256"] == TURBOQUANT_SDIST_SHA256 and pin["filename"] == "turboquant-0.2.0.tar.gz"
    assert pin["url"].startswith("https://files.pythonhosted.org/")
    first = run_in_process(["fetch", "t"], workspace)
    second = run_in_process(["fetch", "t"], workspace)
    assert first.returncode == 0 and second.returncode == 0, first.stderr
    assert second.stdout.startswith("t: 0 fetched")
    assert sha256_file(Store(eb_home).path(TURBOQUANT_SDIST_SHA256)) == TURBOQUANT_SDIST_SHA256


@pytest.mark.network
def test_a_missing_release_is_a_clear_resolve_error_naming_recent_ones(pypi_reachable, tmp_path):
    with pytest.raises(ResolveError) as info:
        PYPI.resolve(PypiRequest("turboquant", "9.9.9", "https://pypi.org/simple"), Context(tmp_path))
    assert info.value.message == "https://pypi.org/simple has no source distribution of turboquant==9.9.9"
    assert "0.2.0" in info.value.hint


def test_wheels_are_chosen_for_the_target_platform_not_the_host():
    tags = target_tags("3.12", "aarch64")
    assert str(tags[0]).startswith("cp312-cp312-manylinux_2_35_aarch64")
    assert all("x86_64" not in str(t) for t in tags)


def test_debian_versions_compare_as_dpkg_does():
    assert compare_versions("1:1.35.0-4", "1.99") > 0
    assert compare_versions("2.36-9+deb12u4", "2.36-9+deb12u14") < 0
    assert compare_versions("1.0~rc1", "1.0") < 0
    assert compare_versions("1.0", "1.0") == 0


@pytest.mark.network
def test_debian_packages_resolve_with_their_closure_from_the_signed_index(debian_reachable):
    archive = DebianArchive(Http(), Archive("http://deb.debian.org/debian", "bookworm", ("main",), False, None, None),
                            "amd64", None)
    archive.load()
    assert archive.signature in (True, None)
    archives = ArchiveSet([archive])
    closure = {p.name: p for p in archives.closure(("busybox-static",), skip_required=False)}
    assert list(closure) == ["busybox-static"]
    assert closure["busybox-static"].filename.startswith("pool/main/b/busybox/busybox-static_")
    gcc = {p.name for p in archives.closure(("gcc",), skip_required=False)}
    assert {"gcc-12", "cpp-12", "binutils", "libc6"} <= gcc
    assert "libc6" not in {p.name for p in archives.closure(("gcc",), skip_required=True)}


@pytest.mark.network
def test_an_archive_signed_by_another_key_than_the_pinned_fingerprint_is_refused(debian_reachable, workspace):
    write_image(workspace, "t", """
        base: scratch
        platform: linux/amd64
        system:
          install: extract
          archives:
            - {url: "http://deb.debian.org/debian", suite: bookworm, keyring: {file: keyring.gpg},
               fingerprint: "0000000000000000000000000000000000000000"}
          packages: [busybox-static]
        """, {"keyring.gpg": open("/usr/share/keyrings/debian-archive-keyring.gpg", "rb").read()})
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 1
    assert "does not verify by the key 0000000000000000000000000000000000000000" in proc.stderr


# -- git: small local repositories served over file:// -------------------------------------------

def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                               "HOME": str(cwd), "PATH": "/usr/bin:/bin", "GIT_ALLOW_PROTOCOL": "file"}).stdout.strip()


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
    return {"url": f"file://{repo}", "path": repo, "first": first, "second": second, "dangling": dangling}


def test_git_refs_resolve_to_full_commits(upstream, eb_home):
    mirror = Mirror(eb_home, upstream["url"], ())
    assert mirror.resolve("main") == upstream["second"]
    assert mirror.resolve("v1.0") == upstream["first"]  # an annotated tag, peeled to its commit
    assert mirror.resolve(upstream["first"][:9]) == upstream["first"]
    assert mirror.resolve(upstream["first"]) == upstream["first"]


def test_a_commit_reachable_from_no_branch_or_tag_is_refused(upstream, eb_home):
    with pytest.raises(ResolveError) as info:
        Mirror(eb_home, upstream["url"], ()).resolve(upstream["dangling"])
    assert "not reachable from any branch or tag" in info.value.message or "has no commit" in info.value.message
    report.count("upstream integrity", "unreachable commits refused")


def test_an_unknown_ref_is_a_clear_error(upstream, eb_home):
    with pytest.raises(ResolveError) as info:
        Mirror(eb_home, upstream["url"], ()).resolve("v9.9")
    assert info.value.message == f"{upstream['url']} has no branch or tag named 'v9.9'"


def test_lock_pins_a_git_source_to_a_full_commit(upstream, workspace):
    write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\n" +
                COMPONENT.format(source=f"{{git: {{url: \"{upstream['url']}\", ref: v1.0}}}}"), BUILD)
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert lock_of(workspace, "t").raw("components.e.source")["commit"] == upstream["first"]


def test_submodules_are_pinned_by_the_commit_the_superproject_records(upstream, tmp_path, workspace, eb_home):
    sub = tmp_path / "sub"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    (sub / "lib.h").write_text("#define LIB 1\n")
    git(sub, "add", ".")
    git(sub, "commit", "-qm", "lib")
    sub_commit = git(sub, "rev-parse", "HEAD")
    top = upstream["path"]
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", f"file://{sub}", "third_party/lib")
    git(top, "commit", "-qm", "with a submodule")
    git(top, "tag", "v2.0")
    write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\n" + COMPONENT.format(
        source=f"{{git: {{url: \"{upstream['url']}\", ref: v2.0, submodules: true, metadata: true}}}}"), BUILD)
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 0, proc.stderr
    pin = lock_of(workspace, "t").raw("components.e.source")
    assert pin["submodules"] == [{"path": "third_party/lib", "url": f"file://{sub}", "commit": sub_commit}]
    from enginebuild.sources.git import KIND, GitRequest

    blob = KIND.tree_tar(GitRequest(upstream["url"], "v2.0", True, True), KIND.pin_from_json(pin), Context(eb_home))
    with tarfile.open(Store(eb_home).path(blob.sha256)) as tar:
        names = tar.getnames()
        assert tar.extractfile("third_party/lib/lib.h").read() == b"#define LIB 1\n"
        assert ".git/HEAD" in names
        assert tar.extractfile(".git/HEAD").read().decode().strip() == pin["commit"]
        assert any(n.startswith(".git/refs/tags/v2.0") or n == ".git/packed-refs" for n in names)




def test_a_repository_from_elsewhere_may_not_name_a_local_submodule(upstream, tmp_path, workspace):
    """A pinned repository served by a git server whose .gitmodules names a repository of this
    machine (file://, or a plain path) is refused at lock: before, git ran with
    protocol.file.allow=always and the local repository was fetched and built into the image."""
    from helpers.registry import free_port

    private = tmp_path / "private"
    private.mkdir()
    git(private, "init", "-q", "-b", "main")
    (private / "secret.txt").write_text("this machine's own\n")
    git(private, "add", ".")
    git(private, "commit", "-qm", "private")
    top = upstream["path"]
    for name, url in (("a", f"file://{private}"), ("b", str(private))):
        git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "--name", name, url, f"third_party/{name}")
        git(top, "commit", "-qm", f"submodule {name}")
        git(top, "tag", f"v3.{name}")
        git(top, "rm", "-q", f"third_party/{name}")  # the next tag has the next submodule alone
    served = tmp_path / "served"
    served.mkdir()
    subprocess.run(["git", "clone", "-q", "--bare", str(top), str(served / "top.git")], check=True, capture_output=True)
    git(served / "top.git", "config", "uploadpack.allowFilter", "true")
    port = free_port()
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={served}",
                               "--listen=127.0.0.1", f"--port={port}", str(served)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if subprocess.run(["git", "ls-remote", f"git://127.0.0.1:{port}/top.git"], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        for tag, said in (("v3.a", f"names 'file://{private}', a repository on this machine: a repository from "
                                   "elsewhere may not reach into this machine's files"),
                          ("v3.b", f"has an unusable URL '{private}'")):
            write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\n" + COMPONENT.format(
                source=f"{{git: {{url: \"git://127.0.0.1:{port}/top.git\", ref: {tag}, submodules: true}}}}"), BUILD)
            proc = run_in_process(["lock", "t"], workspace)
            assert proc.returncode == 1, proc.stderr
            assert said in proc.stderr, proc.stderr
            entry = json.loads((workspace / "lockfiles/t.lock").read_text())["inputs"]["components.e.source"]
            assert entry["resolved"] is None and said in entry["unresolved"]
    finally:
        daemon.terminate()
        daemon.wait(10)


def test_a_metadata_checkout_is_clean_to_git_status_and_describe(upstream, tmp_path, workspace, eb_home):
    """`metadata: true`: the tree as a build receives it is a clean checkout of its tag, as git and
    setuptools-scm see it (`git describe --tags --dirty --long`, what setuptools-scm runs)."""
    top = upstream["path"]
    git(top, "tag", "v1.5")
    write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\n" + COMPONENT.format(
        source=f"{{git: {{url: \"{upstream['url']}\", ref: v1.5, metadata: true}}}}"), BUILD)
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    pin = lock_of(workspace, "t").raw("components.e.source")
    from enginebuild.sources.git import KIND, GitRequest

    blob = KIND.tree_tar(GitRequest(upstream["url"], "v1.5", False, True), KIND.pin_from_json(pin), Context(eb_home))
    tree = tmp_path / "checkout"
    with tarfile.open(Store(eb_home).path(blob.sha256)) as tar:
        tar.extractall(tree, filter="data")
    assert git(tree, "status", "--porcelain") == ""
    assert git(tree, "describe", "--tags", "--dirty", "--long").startswith("v1.5-0-g")
    assert not git(tree, "describe", "--tags", "--dirty").endswith("-dirty")
    (tree / next(p.name for p in tree.iterdir() if p.is_file())).write_text("edited\n")
    assert git(tree, "describe", "--tags", "--dirty").endswith("-dirty")  # an edit is still seen
