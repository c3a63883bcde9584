"""What a registry-cache entry may say before any of it is used (registrycache/cacherecords.py), who may
have said it (registrycache/cachetrust.py), and the store's refusal to take a name that is not a digest
as a path: each case a record or a name another writer could put in the cache."""
from __future__ import annotations

import base64

import pytest

from enginebuild.errors import UserError
from enginebuild.io.store import BadDigest, Store
from enginebuild.registrycache import cacherecords
from enginebuild.registrycache.cacherecords import BadEntry, checked
from enginebuild.settings import reset_settings
from enginebuild.trust import cachetrust
from helpers.cacheentry import new_key, public_text

A, B = "a" * 64, "b" * 64
CARRIED = {A: 10, B: 20}


@pytest.mark.parametrize("name", ["../../../victim/v1", "AA" * 32, "a" * 63, "a" * 65, "", "sha256:" + "a" * 64,
                                  "a" * 62 + "/.", "a" * 63 + "\n"])
def test_the_store_never_takes_a_name_that_is_not_a_digest_as_a_path(tmp_path, name):
    victim = tmp_path / "victim" / "v1"
    victim.parent.mkdir()
    victim.write_text("precious")
    store = Store(tmp_path / "home" / "a" / "b" / "c")
    for use in (store.path, store.has, lambda n: store.check(n, "x"), lambda n: store.verified(n, "x")):
        with pytest.raises(BadDigest, match="is not a sha256 digest"):
            use(name)
    with pytest.raises(BadDigest, match="cannot name a record"):
        store.record("layers", "../../victim/v1")
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("record,why", [
    ({"layers": [["../../../victim/v1", 10]], "name": "x"}, "not a sha256"),
    ({"layers": [[A, 11]], "name": "x"}, "does not carry"),
    ({"layers": [["c" * 64, 10]], "name": "x"}, "does not carry"),
    ({"layers": [[A, -1]], "name": "x"}, "not a size"),
    ({"layers": [[A, 10.0]], "name": "x"}, "not a size"),
    ({"layers": [], "name": "x"}, "empty"),
    ({"layers": [[A, 10]], "name": "x\x1b[2J"}, "not a printable line"),
    ({"layers": "aa"}, "not a list"),
])
def test_a_layer_record_names_only_blobs_its_entry_carries(record, why):
    with pytest.raises(BadEntry, match=why):
        checked(cacherecords.LAYER, record, CARRIED)


def test_a_well_formed_record_is_taken_with_its_own_fields_only():
    got = checked(cacherecords.LAYER, {"layers": [[A, 10], [B, 20]], "name": "step x", "extra": "/etc/passwd"},
                  CARRIED)
    assert got == {"layers": [[A, 10], [B, 20]], "name": "step x"}


@pytest.mark.parametrize("wheel", ["../../x.whl", "/abs/x.whl", "a/b.whl", "x.tar.gz", ".whl"])
def test_an_outputs_record_refuses_a_wheel_name_that_is_a_path(wheel):
    record = {"sha256": A, "size": 10, "files": 1, "wheels": [[wheel, B, 20]], "name": "e", "seconds": 1.0}
    with pytest.raises(BadEntry, match="not a wheel's file name"):
        checked(cacherecords.OUTPUT, record, CARRIED)
    record["wheels"] = [["e-1.0-py3-none-any.whl", B, 20]]
    assert checked(cacherecords.OUTPUT, record, CARRIED)["wheels"] == [["e-1.0-py3-none-any.whl", B, 20]]


@pytest.mark.parametrize("home", ["127.0.0.1:5000/x&mount=sha256:00", "../x", "127.0.0.1:5000/UPPER", "x y/z", ""])
def test_a_substitute_names_only_repositories(home):
    record = {"name": "n", "layers": [[A, 10]], "forms": {"gzip": [[B, 5]]}, "homes": {B: [home]}, "secrets": []}
    with pytest.raises(BadEntry, match="not repository names"):
        checked(cacherecords.SUBSTITUTE, record, {})
    record["homes"] = {B: ["127.0.0.1:5000/enginebuild-test/img"]}
    assert checked(cacherecords.SUBSTITUTE, record, {})["homes"] == {B: ["127.0.0.1:5000/enginebuild-test/img"]}


@pytest.mark.parametrize("record,why", [
    ({"name": "n", "layers": [[A, 10]], "forms": {"bzip9": [[B, 5]]}, "homes": {}}, "no compression"),
    ({"name": "n", "layers": [[A, 10]], "forms": {"gzip": [[B, 5], [A, 1]]}, "homes": {}}, "not one per layer"),
    ({"name": "n", "layers": [[A, 10]], "forms": {"gzip": [[B, 99_999_999_999_999]]}, "homes": {}}, "not a size"),
    ({"name": "n", "layers": [[A, 10]], "forms": {"gzip": [[B, 5]]}, "homes": {}, "secrets": ["$(rm)"]},
     "not secret names"),
    # a layer said to hold nothing the checks read must be one of the record's own blobs
    ({"name": "n", "layers": [[A, 10]], "forms": {"gzip": [[B, 5]]}, "homes": {}, "inert": [B]},
     "inert: not blobs of the layer"),
    ({"name": "n", "layers": [[A, 10]], "forms": {"gzip": [[B, 5]]}, "homes": {}, "inert": ["../../etc/passwd"]},
     "inert: not blobs of the layer"),
])
def test_a_substitute_of_another_shape_is_refused(record, why):
    with pytest.raises(BadEntry, match=why):
        checked(cacherecords.SUBSTITUTE, record, {})


@pytest.mark.parametrize("line", ["ok\n::warning::forged", "\x1b[31mFAILED\x1b[0m", "::error file=x::y", "x" * 401])
def test_a_verdict_line_that_would_reach_a_log_raw_is_refused(line):
    with pytest.raises(BadEntry, match="not a printable line"):
        checked(cacherecords.VERDICT, {"lines": {"kernels": line}}, {})
    with pytest.raises(BadEntry, match="not the checks' lines"):
        checked(cacherecords.VERDICT, {"lines": {"other": "ok"}}, {})
    assert checked(cacherecords.VERDICT, {"lines": {"kernels": "ok: 3 binaries"}}, {}) == \
        {"lines": {"kernels": "ok: 3 binaries"}}


def test_an_entry_of_an_unknown_kind_is_refused():
    with pytest.raises(BadEntry, match="not a kind of entry"):
        checked("anything", {}, {})


def _manifest(config: str = "sha256:" + A) -> dict:
    return {"config": {"digest": config, "size": 10, "mediaType": "c"},
            "layers": [{"digest": "sha256:" + B, "size": 20, "mediaType": "t"}]}


def test_a_signature_holds_for_its_tag_config_and_blobs_only(tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINEBUILD_CACHE_KEY", str(new_key(tmp_path / "k.pem")))
    reset_settings()
    key = cachetrust.signing_key(tmp_path, make=False)
    assert key is not None and key.public.text == public_text(tmp_path / "k.pem")
    doc = {**_manifest(), "annotations": cachetrust.signed(key, "tag1", _manifest())}
    assert cachetrust.signer("tag1", doc) == (key.public, True)
    assert cachetrust.signer("tag2", doc)[1] is False  # the same entry under another key
    moved = {**_manifest("sha256:" + "c" * 64), "annotations": doc["annotations"]}
    assert cachetrust.signer("tag1", moved)[1] is False  # another record
    grown = {**doc, "layers": [{**doc["layers"][0], "size": 21}]}
    assert cachetrust.signer("tag1", grown)[1] is False  # a blob's size changed
    unsigned = _manifest()
    assert cachetrust.signer("tag1", unsigned) == (None, False)


def test_trust_is_the_signing_key_and_the_keys_listed(tmp_path, monkeypatch):
    other = public_text(new_key(tmp_path / "other.pem"))
    monkeypatch.delenv("ENGINEBUILD_CACHE_KEY", raising=False)
    monkeypatch.setenv("ENGINEBUILD_CACHE_TRUST", other)
    reset_settings()
    home = tmp_path / "home"
    assert cachetrust.signing_key(home, make=False) is None  # none is made to read
    trust = cachetrust.trust(home, ())
    assert {k.text for k in trust.keys} == {other}
    own = cachetrust.signing_key(home, make=True)
    assert own is not None and (home / "keys" / "cache-signing.pem").stat().st_mode & 0o077 == 0
    assert (home / "keys").stat().st_mode & 0o077 == 0
    assert cachetrust.trust(home, ()).keys == {own.public, cachetrust.parse_public_key(other, "")}
    assert cachetrust.signing_key(home, make=True).public == own.public  # made once


@pytest.mark.parametrize("text", ["ed25519:" + base64.b64encode(b"x" * 31).decode(), "rsa:AAAA", "ed25519:!!!!"])
def test_a_trusted_key_that_is_not_one_is_refused_naming_where(monkeypatch, tmp_path, text):
    monkeypatch.setenv("ENGINEBUILD_CACHE_TRUST", text)
    reset_settings()
    with pytest.raises(UserError, match="ENGINEBUILD_CACHE_TRUST: .* is not a cache key"):
        cachetrust.trust(tmp_path, ())


def test_a_signing_key_that_is_not_an_ed25519_pem_is_refused_without_printing_it(monkeypatch, tmp_path):
    monkeypatch.setenv("ENGINEBUILD_CACHE_KEY", "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LXZhbHVl\n-----END PRIVATE KEY-----")
    reset_settings()
    with pytest.raises(UserError) as caught:
        cachetrust.signing_key(tmp_path, make=True)
    assert "ENGINEBUILD_CACHE_KEY: not an unencrypted Ed25519 private key" in caught.value.message
    assert "c2VjcmV0" not in caught.value.render()
