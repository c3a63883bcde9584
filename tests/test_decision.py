"""The one decision behind every answer of `image` (state/decision.py), read from the records a
finished build leaves (the plan memo) and an engine that answers which image each tag names: an
in-memory engine here, a dict. The no-op, the file edit and the full build all act on it (the
Docker tests of tests/test_fastedit.py see them do so end to end)."""
from __future__ import annotations

import json
import os
import time

from enginebuild.state.decision import FILES_EDITED, REBUILD, UP_TO_DATE, decide
from enginebuild.state.memo import ImageRun, PlanMemo, RunOptions


def recorded(tmp_path, *, edit: bool = True):
    """A memo as a finished build stores it: a spec and a copied script among its inputs, one
    image (two tags) with its edit record; and an engine holding that image under both tags."""
    (tmp_path / "images/x").mkdir(parents=True)
    spec, script = tmp_path / "images/x/image.yaml", tmp_path / "images/x/run.sh"
    spec.write_text("base: scratch\n")
    script.write_text("echo one\n")
    old = time.time() - 60  # not racy: a fresh time stamp counts as changed
    for path in (spec, script):
        os.utime(path, (old, old))
    memo = PlanMemo(tmp_path / "home")
    key = RunOptions().key(str(tmp_path), "x")
    image = ImageRun(("enginebuild/x:latest", "enginebuild/x:latest-amd64"), "sha256:" + "1" * 64,
                     {"only_copied": [str(script)]} if edit else {})
    memo.store(key, PlanMemo.snapshot([spec, script]), [image])
    engine = {tag: image.id for tag in image.tags}
    return memo, key, engine, spec, script


def test_an_unchanged_image_the_engine_holds_is_up_to_date(tmp_path):
    memo, key, engine, *_ = recorded(tmp_path)
    decision = decide(memo, key, lambda tag, ident: engine.get(tag) == ident)
    assert decision.answer == UP_TO_DATE and decision.describe() == "up to date"
    assert decision.doc is not None and decision.doc.summary == "enginebuild/x:latest-amd64"  # each image's last tag


def test_a_record_the_engine_contradicts_decides_a_rebuild_and_says_which_tag(tmp_path):
    memo, key, engine, *_ = recorded(tmp_path)
    engine["enginebuild/x:latest-amd64"] = "sha256:" + "2" * 64  # retagged since: the record no longer holds
    decision = decide(memo, key, lambda tag, ident: engine.get(tag) == ident)
    assert decision.answer == REBUILD
    assert decision.declined == "the engine does not hold enginebuild/x:latest-amd64 as last built"


def test_a_changed_record_changes_what_the_no_op_decides(tmp_path):
    memo, key, engine, *_ = recorded(tmp_path)
    path = next((tmp_path / "home/plans").iterdir())
    doc = json.loads(path.read_text())
    doc["result"]["images"][0]["id"] = "sha256:" + "3" * 64  # the record, not the engine, moved
    path.write_text(json.dumps(doc))
    decision = decide(memo, key, lambda tag, ident: engine.get(tag) == ident)
    assert decision.answer == REBUILD and "does not hold enginebuild/x:latest as last built" in decision.declined


def test_only_a_copied_file_edited_is_a_file_edit_naming_it(tmp_path):
    memo, key, engine, _, script = recorded(tmp_path)
    script.write_text("echo two\n")
    decision = decide(memo, key, lambda tag, ident: engine.get(tag) == ident)
    assert decision.answer == FILES_EDITED and decision.edited == (str(script),)
    assert decision.describe() == "files edited: run.sh"


def test_anything_else_edited_is_a_rebuild_naming_it(tmp_path):
    memo, key, engine, spec, script = recorded(tmp_path)
    spec.write_text("base: scratch\nenv: {A: b}\n")
    decision = decide(memo, key, lambda tag, ident: engine.get(tag) == ident)
    assert decision.answer == REBUILD and decision.declined == "changed, and not only files it copies: image.yaml"
    memo, key, engine, _, script = recorded(tmp_path / "noedit", edit=False)
    script.write_text("echo two\n")
    decision = decide(memo, key, lambda tag, ident: engine.get(tag) == ident)
    assert decision.answer == REBUILD and "no edit record" in decision.declined


def test_no_record_and_a_damaged_store_are_rebuilds(tmp_path):
    memo, key, engine, *_ = recorded(tmp_path)
    other = RunOptions(platforms=("linux/arm64",)).key(str(tmp_path), "x")
    assert decide(memo, other, lambda tag, ident: True).declined == \
        "no finished build of it with these options is recorded"
    path = next((tmp_path / "home/plans").iterdir())
    doc = json.loads(path.read_text())
    doc["blobs"] = {"a" * 64: [1, 2, 3, 4]}  # a layer the record stands on, gone from the store
    path.write_text(json.dumps(doc))
    assert decide(memo, key, lambda tag, ident: engine.get(tag) == ident).declined.startswith("a stored layer changed")
