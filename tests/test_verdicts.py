"""The checks' one verdict store (checks/verdicts.py): a verdict is answered only to the check
that kept it, survives a new Store on the same home, and a damaged record is no verdict."""
from __future__ import annotations

from enginebuild.checks.verdicts import RECORD, Verdicts
from enginebuild.io.store import Store, sha256_bytes


def test_a_verdict_is_answered_only_to_the_check_that_kept_it_and_a_damaged_one_is_none(tmp_path):
    key = sha256_bytes(b"an image and the checks asked")
    verdicts = Verdicts(Store(tmp_path))
    assert verdicts.kept("imports", key) is None
    verdicts.keep("imports", key, {"modules": {"vllm": "ok"}, "imported": ["vllm"]}, 7.456, "sha256:" + "a" * 64)

    again = Verdicts(Store(tmp_path)).kept("imports", key)  # another run on the same store
    assert again is not None and again.found["imported"] == ["vllm"]
    assert again.seconds == 7.46 and again.image == "sha256:" + "a" * 64
    assert Verdicts(Store(tmp_path)).kept("behaviour", key) is None  # another check's record: not its verdict
    assert Verdicts(Store(tmp_path)).kept("bytes", sha256_bytes(b"other")) is None

    path = tmp_path / "records" / RECORD / f"{key}.json"
    path.write_text(path.read_text().replace('"vllm"', '"torch"'))  # edited by hand: its own hash no longer holds
    assert Verdicts(Store(tmp_path)).kept("imports", key) is None
