"""The patch applier places hunks where `git apply` does: every case of tests/corpus/patches.json
(recorded from real git by scripts/record-patch-corpus.py) gives the same verdict and the same
tree, bytes and modes, or is one of the departures the applier documents (stricter, never a
different tree). The corpus is also re-recorded against this machine's git."""
import base64
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

from conftest import ROOT, need
from enginebuild.core.patchfile import PatchError, parse_patch
from enginebuild.patches.check import check_stack
from enginebuild.sources.trees import DirTree
from helpers import report

CORPUS = json.loads((ROOT / "tests/corpus/patches.json").read_text())
HEADER = "Subject: a corpus case\nDescription: recorded from git apply\nUpstream: not forwarded: a test\n---\n"
# where the applier is stricter than git, and why (docs/patches.md says the same)
DEPARTURES = {
    "unidiff-zero-insert": "a context-free insertion: git puts it at the end of the file, not at its stated line",
}


def tree_of(files: dict) -> dict:
    return {p: (base64.b64decode(f["b64"]), f["mode"]) for p, f in files.items()}


@dataclass
class Refused:
    """A patch the reader refuses, as a result that did not apply."""
    detail: str
    applied: bool = False
    status: str = "refused"


def apply_case(case: dict, tmp_path):
    root = tmp_path / "tree"
    for path, (data, mode) in tree_of(case["files"]).items():
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
        full.chmod(int(mode, 8))
    root.mkdir(exist_ok=True)
    try:
        patch = parse_patch("corpus/case.patch", HEADER.encode() + case["patch"].encode("latin-1"))
    except PatchError as exc:  # refused as it is read (a binary change without its data): applies nothing
        return Refused(exc.message), tree_of(case["files"])
    tree = DirTree(root, case["name"])
    outcome = check_stack([patch], tree)
    result = outcome.results[0]
    after = tree_of(case["files"])
    for path, data in outcome.files.items():
        if data is None:
            after.pop(path, None)
        else:
            kept = after[path][1] if path in after else "644"
            after[path] = (data, f"{outcome.modes[path]:o}" if path in outcome.modes else kept)
    return result, after


def test_the_corpus_covers_what_git_decides():
    assert len(CORPUS["cases"]) >= 40
    verdicts = {c["git"]["applies"] for c in CORPUS["cases"]}
    assert verdicts == {True, False}


@pytest.mark.parametrize("case", CORPUS["cases"], ids=[c["name"] for c in CORPUS["cases"]])
def test_the_applier_agrees_with_git(case, tmp_path):
    result, after = apply_case(case, tmp_path)
    git = case["git"]
    report.count("patch corpus", "cases compared with git")
    if case["name"] in DEPARTURES:
        assert git["applies"] and not result.applied, "a documented departure must stay one"
        assert "no context lines" in result.detail
        return
    assert result.applied == git["applies"], f"{case['why']}: git says {git['message'] or 'applies'}; " \
                                             f"we say {result.status}: {result.detail}"
    if git["applies"]:
        assert after == tree_of(git["files"]), case["why"]


def test_the_recorded_corpus_is_what_this_machines_git_does():
    need(shutil.which("git") is not None, "git is not installed")
    done = subprocess.run([sys.executable, str(ROOT / "scripts/record-patch-corpus.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
