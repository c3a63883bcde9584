"""The deployment lock as a file: written whole (keys sorted), read back the same, every mistake
named with its file, line and key, and a start that is not the lock's refused naming each
difference. (Starting a locked deployment, moving its weights and checking its answers runs
llama.cpp for real: tests/test_llamacpp_serving.py.)"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from enginebuild.errors import SpecError, UserError
from enginebuild.serving.deployment import Answer, Deployment, ModelPin, differences, file_differences, hub_names, read, write
from enginebuild.serving.weightfiles import hashed

SHA = "ab" * 32
IMAGE = "127.0.0.1:5000/serve/llama@sha256:" + "cd" * 32


def _lock(**changes) -> Deployment:
    base = dict(image=IMAGE, nodes=(("head", "10.0.0.2", "head"), ("worker", "10.0.0.3", "worker")),
                model=ModelPin("/srv/models/tiny", {"tiny.gguf": (1234, SHA), "sub/tokenizer.json": (5, SHA)}),
                env={"CTX_SIZE": "512"}, secrets=("HF_TOKEN",),
                answers=(Answer("The capital of France is", 8, " Paris, and"),))
    return Deployment(**{**base, **changes})


def test_a_lock_is_written_sorted_and_read_back_the_same(tmp_path):
    path = tmp_path / "deploy.lock.json"
    write(path, _lock())
    text = path.read_text()
    doc = json.loads(text)
    assert list(doc) == sorted(doc) and doc["format"] == 1 and doc["secrets"] == ["HF_TOKEN"]
    assert doc["model"]["files"]["tiny.gguf"] == {"sha256": SHA, "size": 1234}
    assert read(path) == _lock()
    assert "hf_" not in text  # a secret by name only


@pytest.mark.parametrize("edit, where", [
    (lambda d: d.update(image="127.0.0.1:5000/serve/llama:latest"), "image: expected an image by digest"),
    (lambda d: d["model"]["files"]["tiny.gguf"].update(sha256="xyz"), "model.files.tiny.gguf.sha256: expected a sha256"),
    (lambda d: d["model"]["files"].update({"../etc/passwd": {"size": 1, "sha256": SHA}}), "model.files.../etc/passwd"),
    (lambda d: d["answers"][0].pop("expected"), "answers[0].expected: required key is missing"),
    (lambda d: d["nodes"][1].update(role="boss"), "nodes[1].role: expected head or worker"),
    (lambda d: d.update(envs={}), "envs: unknown key"),
    (lambda d: d["model"].update(path="/srv/models/../../etc"), "model.path: expected an absolute path without"),
])
def test_a_wrong_key_is_named_with_its_file_and_line(tmp_path, edit, where):
    path = tmp_path / "deploy.lock.json"
    write(path, _lock())
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc, indent=2))
    with pytest.raises(SpecError) as caught:
        read(path)
    message = caught.value.message
    assert message.startswith(f"{path}:") and where in message, message
    line = int(message.split(":")[1])
    assert 1 < line <= len(path.read_text().splitlines())


def test_a_cli_user_error_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "deploy.lock.json"
    path.write_text('{"format": 1, "image": "x@sha256:' + "0" * 64 + '", "nodes": [{"name": "a"}]}\n')
    proc = subprocess.run([sys.executable, str(ROOT / "BUILD.py"), "serve", "up", "--locked", str(path),
                           "--node", "a=10.0.0.2"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{path}:1: nodes[0].address: required key is missing" in proc.stderr, proc.stderr


def test_a_start_that_is_not_the_locks_is_named_difference_by_difference():
    lock = _lock()
    assert differences(lock, _lock()) == []
    asked = _lock(image=IMAGE[:-1] + "0", env={"CTX_SIZE": "1024", "SPEC_TYPE": "off"}, secrets=(),
                  nodes=(("head", "10.0.0.2", "head"),), model=ModelPin("/srv/models/other", {}))
    found = differences(lock, asked)
    assert found[0].startswith(f"image: the lock has {IMAGE}, this start ")
    assert "nodes: the lock has head=10.0.0.2 (head), worker=10.0.0.3 (worker); this start head=10.0.0.2 (head)" \
        in found
    assert "model: the lock has /srv/models/tiny, this start /srv/models/other" in found
    assert "env: the lock has CTX_SIZE=512, this start CTX_SIZE=1024" in found
    assert "env: the lock has no SPEC_TYPE, this start SPEC_TYPE=off" in found
    assert "secrets: the lock names HF_TOKEN, this shell has none" in found


def test_a_nodes_copy_is_hashed_and_each_differing_file_named(tmp_path):
    (tmp_path / "m" / "sub").mkdir(parents=True)
    (tmp_path / "m" / "tiny.gguf").write_bytes(b"GGUF" + bytes(100))
    (tmp_path / "m" / "sub" / "tokenizer.json").write_text("{}")
    (tmp_path / "m" / "link.json").symlink_to("sub/tokenizer.json")
    (tmp_path / "m" / "broken").symlink_to("nowhere")
    found = hashed(str(tmp_path / "m"))
    assert sorted(found["files"]) == ["link.json", "sub/tokenizer.json", "tiny.gguf"]
    assert found["files"]["link.json"] == found["files"]["sub/tokenizer.json"]
    assert found["errors"] == ["broken: not a regular file (a link that leads nowhere?)"]
    wanted = {p: (s, h) for p, (s, h) in found["files"].items()}
    have = {**wanted, "tiny.gguf": (104, "00" * 32), "extra.bin": (1, SHA)}
    del have["link.json"]
    assert file_differences(wanted, have) == [
        "extra.bin: not in the lock", "link.json: missing",
        f"tiny.gguf: sha256 000000000000… (104 bytes) where the lock has {wanted['tiny.gguf'][1][:12]}… (104 bytes)"]


def test_a_hub_snapshots_repository_and_revision_are_read_from_its_path():
    rev = "0123456789abcdef0123456789abcdef01234567"
    assert hub_names(f"/root/.cache/huggingface/hub/models--Qwen--Qwen3-0.6B/snapshots/{rev}") == ("Qwen/Qwen3-0.6B", rev)
    assert hub_names("/srv/models/tiny") == ("", "")


def test_a_lock_of_a_floating_image_is_refused():
    from enginebuild.serving.layout import Options
    from enginebuild.serving.nodes import Node
    from enginebuild.usecases.deploying import described
    from enginebuild.usecases.serving import Request

    with pytest.raises(UserError, match="pins the image by digest"):
        described(Request("enginebuild/llamacpp-cpu:latest", (Node("head", "10.0.0.2"),), Options()))


def test_a_bench_result_is_read_as_another_partys_and_recorded_with_the_lock():
    from enginebuild.serving.benchrecord import record, runs_of

    good = {"benchmarks": [{"prompt_size": 64, "response_size": 8, "concurrency": 1,
                            "pp_throughput": {"mean": 812.5}, "tg_throughput": {"mean": 55.25}}]}
    runs = runs_of(good)
    doc = record(_lock(), {"BENCH_PP": "64"}, runs)
    assert doc["image"] == IMAGE and doc["runs"] == [{"prompt_size": 64, "response_size": 8, "concurrency": 1,
                                                       "pp_tokens_s": 812.5, "tg_tokens_s": 55.25}]
    assert len(doc["model"]["files_sha256"]) == 64 and doc["env"] == {"CTX_SIZE": "512"}
    for bad in ({}, {"benchmarks": []}, {"benchmarks": [{"prompt_size": "64"}]},
                {"benchmarks": [{**good["benchmarks"][0], "tg_throughput": {"mean": float("inf")}}]}):
        with pytest.raises(ValueError):
            runs_of(bad)
