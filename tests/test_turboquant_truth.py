"""What an NVIDIA GPU did with TurboQuant's CUDA-graph check (tests/corpus/turboquant-gpu-outcomes.json,
recorded by scripts/gpu-truth/turboquant.py on an H100): without the patch, capture is refused
with PyTorch's host-to-device copy error; with it, the quantizer is captured and a replay on
new input equals the eager result. The record holds to the check as the patch carries it now
(its definition's sha256) and to the outputs the check expects: a changed check makes it stale,
loudly. tests/test_mission_image.py ties it to the wheel a build makes (its sha256)."""
from __future__ import annotations

import hashlib
import json

from conftest import ROOT
from enginebuild.recipe.patchchecks import read_checks

RECORD = json.loads((ROOT / "tests/corpus/turboquant-gpu-outcomes.json").read_text())
PATCH = "turboquant/0001-cache-qjl-powers-per-device.patch"


def current_check():
    (check,) = read_checks(ROOT / "patches" / PATCH, PATCH, ROOT)
    return check


def test_the_record_names_the_gpu_the_driver_and_pytorch():
    assert RECORD["gpu"].startswith("NVIDIA ") and RECORD["driver"].count(".") == 2
    assert RECORD["torch"].startswith("2.11") and RECORD["cuda"]
    assert {r["variant"] for r in RECORD["runs"]} == {"unpatched", "patched"}


def test_the_record_is_of_the_check_the_patch_carries_now():
    definition = hashlib.sha256(json.dumps(current_check().definition(), sort_keys=True).encode()).hexdigest()
    for run in RECORD["runs"]:
        assert run["check"] == "cuda-graph-capture"
        assert run["definition_sha256"] == definition, \
            "the check changed since the GPU ran it: run scripts/gpu-truth/turboquant.py again"


def test_unpatched_capture_is_refused_and_patched_it_captures_and_replays_as_eager():
    check = current_check()
    runs = {r["variant"]: r for r in RECORD["runs"]}
    assert runs["unpatched"]["status"] == 0 and runs["patched"]["status"] == 0
    assert "Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned" \
        in runs["unpatched"]["output"]
    assert check.unpatched_by(runs["unpatched"]["output"]) and not check.patched_by(runs["unpatched"]["output"])
    assert runs["patched"]["output"] == "captured; replay equals eager" and check.patched_by(runs["patched"]["output"])
    assert runs["unpatched"]["wheel_sha256"] != runs["patched"]["wheel_sha256"]
