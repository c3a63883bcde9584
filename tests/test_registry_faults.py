"""A misbehaving registry: bounded retries that honour Retry-After, the token flow with the scope
asked, clear messages, and never a wrong digest or a push recorded that did not happen."""
import json
import re
import uuid
from collections import Counter

import pytest

from conftest import ROOT, run_cli
from enginebuild.lock.lockfile import read_lock
from enginebuild.recipe.catalog import Catalog
from helpers import report
from helpers.faultproxy import FaultProxy
from helpers.registry import push_blob_image
from helpers.specs import write_image

pytestmark = [pytest.mark.registry]

MANIFEST = r"/v2/enginebuild-test/fault/manifests/"


@pytest.fixture(scope="module")
def proxied(registry):
    proxy = FaultProxy(registry.host)
    digest = push_blob_image(registry.host, "enginebuild-test/fault", "1")
    yield proxy, digest
    proxy.shutdown()


@pytest.fixture
def proxy(proxied):
    proxy, digest = proxied
    proxy.reset()
    return proxy, digest


def lock_through(proxy, workspace, env=None):
    write_image(workspace, "t", f"base: {proxy.host}/enginebuild-test/fault:1\nplatform: linux/amd64\n")
    proc = run_cli(["lock", "--update", "t"], workspace, env={"ENGINEBUILD_HTTP_BACKOFF": "0.05", **(env or {})})
    lock = read_lock(workspace, Catalog(workspace).load("t"))
    return proc, lock


BASE = "runtime.base@linux/amd64"


def outcome(kind: str, **conditions: bool) -> None:
    """Count the fault for the report, then assert each condition by name (so a failure says which)."""
    report.count("registry faults", f"{kind} injected")
    report.count("registry faults", f"{kind} handled", int(all(conditions.values())))
    failed = [name for name, ok in conditions.items() if not ok]
    assert failed == [], f"{kind}: not as expected: {', '.join(failed)}"


def digest_of(lock):
    pin = lock.raw(BASE)
    return pin["digest"] if pin else None


def test_a_bearer_challenge_is_answered_with_the_scope_the_registry_named(proxy, workspace):
    proxy, digest = proxy
    proxy.bearer = True
    proc, lock = lock_through(proxy, workspace)
    outcome("401 bearer", exit_0=proc.returncode == 0, locked_digest=digest_of(lock) == digest,
            scope_asked=proxy.scopes == ["repository:enginebuild-test/fault:pull"])


def test_403_is_a_clear_error_and_records_no_digest(proxy, workspace):
    proxy, _ = proxy
    proxy.add("GET", MANIFEST, "status", status=403, times=100)
    proc, lock = lock_through(proxy, workspace)
    outcome("403", exit_1=proc.returncode == 1, nothing_locked=digest_of(lock) is None,
            says_access_denied="access denied" in proc.stderr,
            recorded_why="lack pull access" in lock.unresolved()[BASE])


def test_404_says_there_is_no_such_manifest(proxy, workspace):
    proxy, _ = proxy
    proxy.add("GET", MANIFEST, "status", status=404, times=100)
    proc, lock = lock_through(proxy, workspace)
    outcome("404", exit_1=proc.returncode == 1, nothing_locked=digest_of(lock) is None,
            says_no_such_manifest="no such manifest" in proc.stderr)


def test_429_waits_as_long_as_retry_after_says(proxy, workspace):
    proxy, digest = proxy
    proxy.add("GET", MANIFEST, "status", status=429, headers={"Retry-After": "2"}, times=1)
    proc, lock = lock_through(proxy, workspace)
    asked = [at for method, path, at in proxy.stamps if method == "GET" and "/manifests/" in path]
    outcome("429 retry-after", exit_0=proc.returncode == 0, locked_digest=digest_of(lock) == digest,
            waited=len(asked) >= 2 and asked[1] - asked[0] >= 2.0,  # as the registry saw it: no machine speed in it
            said_so="HTTP 429; retrying in 2.0s" in proc.stderr)


def test_a_burst_of_503_is_retried_a_bounded_number_of_times(proxy, workspace):
    proxy, digest = proxy
    proxy.add("GET", MANIFEST, "status", status=503, times=3)
    proc, lock = lock_through(proxy, workspace)
    outcome("503 burst", exit_0=proc.returncode == 0, locked_digest=digest_of(lock) == digest)
    proxy.reset()
    proxy.add("GET", MANIFEST, "status", status=503, times=1000)
    kept, lock = lock_through(proxy, workspace)  # a pin from before is kept, and the failure said
    assert kept.returncode == 0 and digest_of(lock) == digest and "kept the previous pin" in kept.stderr
    (workspace / "lockfiles/t.lock").unlink()
    proxy.log.clear()
    proc, lock = lock_through(proxy, workspace)
    attempts = sum(1 for entry in proxy.log if entry[2] == 503)
    outcome("503 forever", exit_1=proc.returncode == 1, nothing_locked=digest_of(lock) is None,
            six_attempts=attempts == 6, said_so="after 6 attempts" in proc.stderr,
            hint_fits="try again later" in proc.stderr)


def test_connection_resets_are_retried(proxy, workspace):
    proxy, digest = proxy
    proxy.add("GET", MANIFEST, "reset", times=2)
    proc, lock = lock_through(proxy, workspace)
    outcome("connection reset", exit_0=proc.returncode == 0, locked_digest=digest_of(lock) == digest)


def test_a_digest_header_that_disagrees_with_the_body_is_never_recorded(proxy, workspace):
    proxy, _ = proxy
    proxy.add("GET", MANIFEST, "lie", times=100)
    proc, lock = lock_through(proxy, workspace)
    outcome("digest mismatch", exit_1=proc.returncode == 1, nothing_locked=digest_of(lock) is None,
            says_claims="claims digest" in proc.stderr, says_nothing_recorded="nothing was recorded" in proc.stderr)


# -- pushes through the proxy: enginebuild uploads, checks and records -----------------------------

@pytest.fixture(scope="module")
def tiny(docker_engine, debian_reachable, tmp_path_factory):
    import shutil

    workspace = tmp_path_factory.mktemp("tiny-repo")
    for part in ("images", "patches", "lockfiles"):
        shutil.copytree(ROOT / part, workspace / part)
    write_image(workspace, "tiny", "\n".join([
        "base: scratch", "platform: linux/amd64", "system:", "  install: extract", "  packages: [busybox-static]",
        "  run:", '    - ["/bin/busybox", "--install", "-s", "/bin"]', '    - "mkdir -p /tmp && chmod 1777 /tmp"',
        "files:", "  /opt/hello.txt: hello.txt", ""]), {"hello.txt": f"hello {uuid.uuid4().hex}\n"})
    assert run_cli(["lock", "tiny"], workspace).returncode == 0
    assert run_cli(["image", "tiny"], workspace).returncode == 0
    return workspace


def push_through(proxy, workspace, tag):
    repo = f"{proxy.host}/enginebuild-test/pushed-{uuid.uuid4().hex[:8]}"
    proc = run_cli(["push", "tiny", "--to", repo, "--tag", tag], workspace, env={"ENGINEBUILD_HTTP_BACKOFF": "0.05"})
    path = workspace / "lockfiles/tiny.pushes.json"
    records = json.loads(path.read_text())["pushes"] if path.exists() else []
    return proc, repo, [r for r in records if r["repository"] == repo]


def consistent(proxy, proc, repo, records) -> bool:
    """A record exists exactly when the push succeeded, and holds what the registry serves."""
    import requests

    if proc.returncode != 0:
        return records == []
    if len(records) != 1:
        return False
    name = repo.split("/", 1)[1]
    served = requests.head(f"http://{proxy.upstream}/v2/{name}/manifests/{records[0]['tag']}",
                           headers={"Accept": "application/vnd.oci.image.manifest.v1+json, "
                                              "application/vnd.oci.image.index.v1+json"})
    return served.headers.get("Docker-Content-Digest") == records[0]["digest"]


@pytest.mark.docker
def test_a_push_behind_a_bearer_challenge_is_recorded_with_the_served_digest(proxy, tiny):
    proxy, _ = proxy
    proxy.bearer = True
    proc, repo, records = push_through(proxy, tiny, "bearer")
    outcome("push 401 bearer", exit_0=proc.returncode == 0, record_matches_registry=consistent(proxy, proc, repo, records))


@pytest.mark.docker
def test_a_connection_reset_mid_upload_never_records_a_failed_push(proxy, tiny):
    proxy, _ = proxy
    proxy.add("*", r"/blobs/uploads/", "reset", times=3)
    proc, repo, records = push_through(proxy, tiny, "reset")
    outcome("push reset mid-upload", record_matches_registry=consistent(proxy, proc, repo, records))


@pytest.mark.docker
def test_a_registry_that_lies_about_the_pushed_digest_gets_no_record(proxy, tiny):
    proxy, _ = proxy
    proxy.add("HEAD", r"/manifests/lie$", "lie", times=100)
    proc, repo, records = push_through(proxy, tiny, "lie")
    outcome("push digest mismatch", exit_1=proc.returncode == 1, no_record=records == [],
            says_nothing_recorded="nothing recorded" in proc.stderr)


@pytest.mark.docker
def test_a_registry_that_keeps_failing_gets_no_record(proxy, tiny):
    proxy, _ = proxy
    proxy.add("PUT", r"/manifests/down$", "status", status=503, times=1000)
    proc, repo, records = push_through(proxy, tiny, "down")
    outcome("push 503", exit_1=proc.returncode == 1, no_record=records == [],
            says_the_registry_failed="HTTP 503 after 6 attempts" in proc.stderr)


@pytest.mark.docker
def test_an_upload_cut_mid_body_starts_over_and_the_push_succeeds(proxy, tiny):
    proxy, _ = proxy
    cut = proxy.add("PUT", r"/blobs/uploads/", "reset", times=1)  # after 1 KiB of the first layer's body
    proc, repo, records = push_through(proxy, tiny, "cut")
    posts = [entry for entry in proxy.log if entry[0] == "POST"]
    outcome("upload cut mid-body", exit_0=proc.returncode == 0, cut_once=cut.hits == 1,
            record_matches_registry=consistent(proxy, proc, repo, records),
            said_it_starts_over="starting over" in proc.stderr,
            a_fresh_upload_session=len(posts) >= 2)


@pytest.mark.docker
def test_an_upload_that_keeps_failing_stops_in_bounded_attempts_naming_the_last_answer(proxy, tiny):
    proxy, _ = proxy
    proxy.add("PUT", r"/blobs/uploads/", "status", status=503, times=1000)
    proc, repo, records = push_through(proxy, tiny, "stalled")
    puts = [entry for entry in proxy.log if entry[0] == "PUT" and "/blobs/uploads/" in entry[1]]
    per_blob = Counter(re.search(r"digest=(sha256(?::|%3A)[0-9a-f]{64})", path).group(1) for _, path, _ in puts)
    outcome("upload 503", exit_1=proc.returncode == 1, no_record=records == [],
            names_the_last_answer="the registry's last answer: HTTP 503" in proc.stderr,
            # each blob under way (four are sent at a time) tries 5 times; none starts after one failed
            bounded=set(per_blob.values()) == {5} and len(per_blob) <= 4)
