"""Compile caches that outlive a container (serving/compilecache.py): captured as one
deterministic archive under the record of what shapes the compiled code, restored only where
that record is the node's in every field, and only as files under the folders named; and the
ground truth of the GPU machine (tests/corpus/compile-cache-h200.json, made by
scripts/compile-cache-truth.py on an H200): a torch.compile'd model's Inductor and Triton caches,
captured and restored by this code into a fresh process, compile in a fraction of the cold time
with the same outputs."""
from __future__ import annotations

import io
import json
import re
import tarfile

import pytest

from conftest import ROOT
from enginebuild.serving.compilecache import RECORD, Refused, capture, read_record, record_of, restore

HERE = record_of({"gpu": "NVIDIA GB10", "compute_capability": "12.1", "driver": "580.95.05", "cuda": "13.0",
                  "torch": "2.10.0a0+nv26.1", "triton": "3.5.0", "python": "3.12.3", "arch_list": "12.1a",
                  "model": "Qwen/Qwen3.6-35B-A3B-FP8", "model_revision": "a" * 40, "engine_args": "sha256:" + "1" * 64})


@pytest.fixture
def warmed(tmp_path):
    """Folders as a warm-up leaves them: nested files, an executable, an empty folder."""
    inductor, triton = tmp_path / "warm" / "inductor", tmp_path / "warm" / "triton"
    (inductor / "fxgraph" / "ab").mkdir(parents=True)
    (inductor / "fxgraph" / "ab" / "graph").write_bytes(b"compiled graph")
    (inductor / "empty").mkdir()
    (triton / "K1").mkdir(parents=True)
    (triton / "K1" / "kernel.cubin").write_bytes(bytes(range(256)) * 4)
    (triton / "K1" / "launch").write_text("#!/bin/sh\n")
    (triton / "K1" / "launch").chmod(0o755)
    return {"inductor": inductor, "triton": triton}


def fresh(tmp_path, name):
    folders = {"inductor": tmp_path / name / "inductor", "triton": tmp_path / name / "triton"}
    for path in folders.values():
        path.mkdir(parents=True)
    return folders


def test_the_same_files_capture_to_the_same_bytes_and_restore_whole(warmed, tmp_path):
    first = capture(warmed, HERE, tmp_path / "a.tar.gz")
    (warmed["triton"] / "K1" / "kernel.cubin").touch()  # a newer time: the archive does not change
    again = capture(warmed, HERE, tmp_path / "b.tar.gz")
    assert first.sha256 == again.sha256 and first.files == again.files == 3
    assert read_record(tmp_path / "a.tar.gz") == HERE
    into = fresh(tmp_path, "restored")
    assert restore(tmp_path / "a.tar.gz", into, HERE) == 3
    assert (into["triton"] / "K1" / "kernel.cubin").read_bytes() == bytes(range(256)) * 4
    assert (into["triton"] / "K1" / "launch").stat().st_mode & 0o111 and (into["inductor"] / "empty").is_dir()
    (warmed["inductor"] / "fxgraph" / "ab" / "graph").write_bytes(b"another graph")
    assert capture(warmed, HERE, tmp_path / "c.tar.gz").sha256 != first.sha256


@pytest.mark.parametrize("field, value", [("gpu", "NVIDIA H200"), ("compute_capability", "12.0"),
                                          ("arch_list", "12.0"), ("driver", "575.51.03"), ("model_revision", "b" * 40),
                                          ("engine_args", "sha256:" + "2" * 64), ("torch", "2.11.0")])
def test_a_cache_captured_under_another_key_is_refused_naming_the_field(warmed, tmp_path, field, value):
    capture(warmed, {**HERE, field: value}, tmp_path / "other.tar.gz")
    into = fresh(tmp_path, "refused")
    with pytest.raises(Refused, match=re.escape(f"{field}: the cache's '{value}', here '{HERE[field]}'")):
        restore(tmp_path / "other.tar.gz", into, HERE)
    assert not any(into["inductor"].iterdir()) and not any(into["triton"].iterdir())  # nothing written


def hostile(tmp_path, members):
    path = tmp_path / "hostile.tar.gz"
    body = json.dumps({"format": 1, **HERE}).encode()
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(RECORD)
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return path


@pytest.mark.parametrize("member, why", [
    (("triton/../../escape", tarfile.REGTYPE, b"x"), "outside the cache's folders"),
    (("/etc/cron.d/x", tarfile.REGTYPE, b"x"), "outside the cache's folders"),
    (("home/.bashrc", tarfile.REGTYPE, b"x"), "outside the cache's folders"),
    (("triton/link", tarfile.SYMTYPE, b""), "is not a file or a folder"),
    (("triton/dev", tarfile.CHRTYPE, b""), "is not a file or a folder"),
])
def test_a_hostile_archive_writes_nothing_outside_the_cache_folders(tmp_path, member, why):
    into = fresh(tmp_path, "into")
    with pytest.raises(Refused, match=why):
        restore(hostile(tmp_path, [member]), into, HERE)
    assert not (tmp_path / "escape").exists()


def test_a_link_planted_in_a_cache_folder_is_not_written_through(tmp_path):
    into = fresh(tmp_path, "into")
    outside = tmp_path / "outside"
    outside.mkdir()
    (into["triton"] / "K1").symlink_to(outside)
    with pytest.raises(Refused, match="is a link in the cache's folder"):
        restore(hostile(tmp_path, [("triton/K1/kernel.cubin", tarfile.REGTYPE, b"x")]), into, HERE)
    assert not any(outside.iterdir())


def test_the_gpu_machines_ground_truth_warm_is_a_fraction_of_cold_with_the_same_outputs():
    truth = json.loads((ROOT / "tests/corpus/compile-cache-h200.json").read_text())
    assert truth["machine"]["gpu"] == "NVIDIA H200" and truth["machine"]["torch"] and truth["machine"]["driver"]
    assert truth["warm_over_cold"] == round(truth["warm_s"] / truth["cold_s"], 3)
    assert truth["warm_over_cold"] <= 0.3, truth  # measured there: cold, then captured, restored, warm
    assert truth["inductor_cache_counters"]["warm"].get("fxgraph_cache_hit") == 1  # the restored cache was used
    assert truth["outputs_within_fp16_tolerance"] and truth["same_bytes_captured_twice"]
    assert truth["restored_files"] == truth["cache_files"] > 0
    assert "compiled under another key: gpu: the cache's 'NVIDIA GB10', here 'NVIDIA H200'" in truth["other_key_refused"]
