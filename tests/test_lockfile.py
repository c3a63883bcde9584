"""Lockfiles: --check is offline and names the input that changed; builds refuse unpinned inputs;
a failed re-resolution keeps the previous pin; old formats are read and rewritten."""
import json

import pytest

from conftest import ROOT
from enginebuild.io.files import write_atomic
from helpers.faultproxy import FaultProxy
from helpers.inprocess import run_in_process
from helpers.specs import write_image


def test_lock_check_passes_on_the_committed_lockfiles(workspace):
    proc = run_in_process(["lock", "--check"], workspace)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "demo: ok" in proc.stdout


def test_lock_check_fails_naming_the_input_after_a_pinned_input_is_edited(workspace):
    spec = workspace / "images/demo/image.yaml"
    spec.write_text(spec.read_text().replace("packages: [busybox-static, gcc, libc6-dev, ccache]",
                                             "packages: [busybox-static, gcc, libc6-dev, ccache, make]"))
    proc = run_in_process(["lock", "--check", "demo"], workspace)
    assert proc.returncode == 1
    assert ('demo: STALE builder.system@linux/amd64: packages changed from ["busybox-static", "ccache", "gcc", '
            '"libc6-dev"] to ["busybox-static", "ccache", "gcc", "libc6-dev", "make"]') in proc.stdout


def test_lock_check_fails_when_a_lock_is_missing(workspace):
    (workspace / "lockfiles/demo.lock").unlink()
    proc = run_in_process(["lock", "--check", "demo"], workspace)
    assert proc.returncode == 1
    assert "demo: STALE lockfile: lockfiles/demo.lock does not exist" in proc.stdout


def test_a_build_locks_what_is_not_pinned_first_and_refuses_what_it_cannot_lock(workspace):
    write_image(workspace, "t", "base: 127.0.0.1:5999/nowhere/base:latest\nplatform: linux/amd64\n")
    proc = run_in_process(["image", "t"], workspace)
    assert proc.returncode == 2, proc.stderr
    assert "t: runtime.base@linux/amd64 could not be locked before building" in proc.stderr
    assert not (workspace / "lockfiles/t.lock").exists()  # nothing half-written
    for flag in ("--locked", "--frozen"):
        proc = run_in_process(["image", "t", flag], workspace)
        assert proc.returncode == 1, proc.stderr
        assert "images/t/image.yaml:1: t: the lock would change: lockfile: lockfiles/t.lock does not exist" \
            in proc.stderr


def test_an_input_recorded_as_unresolvable_blocks_the_build_with_the_reason(workspace):
    write_image(workspace, "t", "base: 127.0.0.1:5999/nowhere/base:latest\nplatform: linux/amd64\n")
    proc = run_in_process(["lock", "t"], workspace, env={"ENGINEBUILD_HTTP_BACKOFF": "0"})
    assert proc.returncode == 1
    assert "t: runtime.base@linux/amd64 is NOT pinned: " in proc.stderr and "connection refused" in proc.stderr
    lock = json.loads((workspace / "lockfiles/t.lock").read_text())
    assert lock["inputs"]["runtime.base@linux/amd64"]["resolved"] is None
    assert run_in_process(["lock", "--check", "t"], workspace).returncode == 0
    proc = run_in_process(["image", "t"], workspace)
    assert proc.returncode == 2
    assert "input runtime.base@linux/amd64 is not pinned completely in lockfiles/t.lock" in proc.stderr


def test_a_hand_edited_pin_is_refused_naming_the_file(workspace):
    path = workspace / "lockfiles/demo.lock"
    doc = json.loads(path.read_text())
    doc["inputs"]["runtime.system@linux/amd64"]["resolved"]["packages"][0]["sha256"] = "not-a-digest"
    path.write_text(json.dumps(doc))
    proc = run_in_process(["render", "demo"], workspace)
    assert proc.returncode == 2
    assert ("lockfiles/demo.lock: inputs.runtime.system@linux/amd64: sha256 'not-a-digest' is not 64 hex digits"
            in proc.stderr)


def test_a_lock_that_is_not_json_says_how_to_recover_without_going_in_circles(workspace):
    (workspace / "lockfiles/demo.lock").write_text("{ torn")
    proc = run_in_process(["lock", "--check", "demo"], workspace)
    assert proc.returncode == 2
    assert "lockfiles/demo.lock: not valid JSON" in proc.stderr
    assert "git checkout -- lockfiles/demo.lock" in proc.stderr and "delete it" in proc.stderr


def test_a_lock_of_another_image_is_named_as_such(workspace):
    doc = json.loads((workspace / "lockfiles/demo.lock").read_text())
    doc["image"] = "other"
    (workspace / "lockfiles/demo.lock").write_text(json.dumps(doc))
    proc = run_in_process(["lock", "--check", "demo"], workspace)
    assert proc.returncode == 2
    assert "lockfiles/demo.lock: this lock is for image 'other', not 'demo'" in proc.stderr


def test_lock_is_idempotent_and_offline_when_nothing_changed(workspace):
    before = (workspace / "lockfiles/demo.lock").read_bytes()
    proc = run_in_process(["lock", "demo"], workspace, env={"https_proxy": "http://127.0.0.1:9",
                                                     "http_proxy": "http://127.0.0.1:9"})
    assert proc.returncode == 0, proc.stderr
    assert "up to date" in proc.stdout
    assert (workspace / "lockfiles/demo.lock").read_bytes() == before


def test_a_format_1_lock_keeps_the_pins_whose_request_did_not_change(workspace):
    v2 = json.loads((ROOT / "lockfiles/qwen36-dflash.lock").read_text())
    old = v2["inputs"]["components.vllm.source"]
    v1 = {"enginebuild-lock": 1, "image": "qwen36-dflash", "created": v2["created"],
          "inputs": {"engine": {"request": old["request"], "resolved": {"kind": "pypi", **old["resolved"]}}}}
    (workspace / "lockfiles/qwen36-dflash.lock").write_text(json.dumps(v1))
    proc = run_in_process(["lock", "--check", "qwen36-dflash"], workspace)
    assert proc.returncode == 1 and "STALE lockfile: format 1; `lock` rewrites it as format 2" in proc.stdout
    from enginebuild.lock.lockfile import read_lock
    from enginebuild.recipe.catalog import Catalog

    lock = read_lock(workspace, Catalog(workspace).load("qwen36-dflash"))
    assert lock.raw("components.vllm.source") == old["resolved"]


@pytest.mark.network
def test_a_failed_re_resolution_keeps_the_previous_pins_and_says_so(workspace, debian_reachable):
    proxy = FaultProxy("deb.debian.org:80")
    try:
        write_image(workspace, "t", f"""
            base: scratch
            platform: linux/amd64
            system:
              install: extract
              archives: [{{url: "http://{proxy.host}/debian", suite: bookworm}}]
              packages: [busybox-static]
            """)
        assert run_in_process(["lock", "t"], workspace).returncode == 0
        before = json.loads((workspace / "lockfiles/t.lock").read_text())
        proxy.add("GET", ".*", "status", status=404, times=10_000)
        proc = run_in_process(["lock", "t", "--update"], workspace)
        after = json.loads((workspace / "lockfiles/t.lock").read_text())
    finally:
        proxy.shutdown()
    assert proc.returncode == 0, proc.stderr
    assert "runtime.system@linux/amd64: could not be resolved again, kept the previous pin" in proc.stderr
    assert after["inputs"] == before["inputs"]


def test_atomic_writes_leave_no_temporary_files(tmp_path):
    target = tmp_path / "x.lock"
    write_atomic(target, b"one")
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["x.lock"]


def locked_then_edited(workspace) -> dict:
    """An image locked, then given one more system package: the lock as it was before the edit."""
    spec = ("base: scratch\nplatform: linux/amd64\nsystem: {install: extract, packages: [busybox-static]}\n"
            'python: {version: "3.11", requirements: ["tabulate==0.9.0"]}\n')
    write_image(workspace, "t", spec)
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    before = json.loads((workspace / "lockfiles/t.lock").read_text())
    write_image(workspace, "t", spec.replace("[busybox-static]", "[busybox-static, jq]"))
    return before


def test_render_locks_what_the_spec_added_plan_only_says_it_and_both_refuse_with_locked(workspace, debian_reachable,
                                                                                         pypi_reachable):
    before = locked_then_edited(workspace)
    for verb in (["plan", "t"], ["render", "t"]):
        proc = run_in_process([*verb, "--locked"], workspace)
        assert proc.returncode == 1 and "runtime.system@linux/amd64: packages changed" in proc.stderr, proc.stderr
        assert json.loads((workspace / "lockfiles/t.lock").read_text()) == before
    proc = run_in_process(["plan", "t", "--json"], workspace)  # plan never writes: it says what lock would change
    assert proc.returncode == 0, proc.stderr
    assert "`python BUILD.py lock t` would change the lock: runtime.system@linux/amd64: packages changed" in proc.stderr
    assert json.loads(proc.stdout)["images"][0]["image"].startswith("t")  # stdout is the plan alone
    assert json.loads((workspace / "lockfiles/t.lock").read_text()) == before
    proc = run_in_process(["render", "t"], workspace)
    assert proc.returncode == 0 and "t: locked runtime.system@linux/amd64 into lockfiles/t.lock" in proc.stderr
    after = json.loads((workspace / "lockfiles/t.lock").read_text())
    assert after["inputs"]["runtime.python@linux/amd64"] == before["inputs"]["runtime.python@linux/amd64"]
    assert "jq" in [p["name"] for p in after["inputs"]["runtime.system@linux/amd64"]["resolved"]["packages"]]
    assert run_in_process(["render", "t", "--locked"], workspace).returncode == 0  # nothing left to lock


@pytest.mark.docker
def test_an_edited_spec_is_locked_by_image_for_the_changed_input_only(workspace, docker_engine, debian_reachable,
                                                                     pypi_reachable):
    before = locked_then_edited(workspace)
    proc = run_in_process(["image", "t", "--locked"], workspace)
    assert proc.returncode == 1 and "runtime.system@linux/amd64: packages changed" in proc.stderr, proc.stderr
    assert json.loads((workspace / "lockfiles/t.lock").read_text()) == before
    proc = run_in_process(["image", "t"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert "t: locked runtime.system@linux/amd64 into lockfiles/t.lock" in proc.stderr
    after = json.loads((workspace / "lockfiles/t.lock").read_text())
    assert after["inputs"]["runtime.python@linux/amd64"] == before["inputs"]["runtime.python@linux/amd64"]
    names = [p["name"] for p in after["inputs"]["runtime.system@linux/amd64"]["resolved"]["packages"]]
    assert "jq" in names
    assert run_in_process(["lock", "--check", "t"], workspace).returncode == 0
    assert run_in_process(["image", "t", "--locked"], workspace).returncode == 0  # nothing left to lock
