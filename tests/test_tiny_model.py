"""The tiny GGUF model serving tests will mount: written by scripts/make-tiny-gguf.py with the
pinned gguf package, the same bytes from the same seed, and read back as a llama model with
its vocabulary (llama.cpp's llama-server loads it; the served test is the llama.cpp image's)."""
import hashlib
import subprocess
import sys

from conftest import ROOT


def make(path, seed=0):
    subprocess.run([sys.executable, str(ROOT / "scripts/make-tiny-gguf.py"), str(path), "--seed", str(seed)],
                   check=True)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_same_seed_writes_the_same_model_and_another_seed_another(tmp_path):
    first, again, other = make(tmp_path / "a.gguf"), make(tmp_path / "b.gguf"), make(tmp_path / "c.gguf", seed=1)
    assert first == again != other
    assert (tmp_path / "a.gguf").stat().st_size < 1 << 20


def test_the_model_reads_back_as_a_two_layer_llama_with_byte_fallback_tokens(tmp_path):
    import gguf

    make(tmp_path / "m.gguf")
    reader = gguf.GGUFReader(tmp_path / "m.gguf")
    field = reader.fields["general.architecture"]
    assert bytes(field.parts[field.data[0]]).decode() == "llama"
    blocks = reader.fields["llama.block_count"]
    assert int(blocks.parts[blocks.data[0]][0]) == 2
    tokens = reader.fields["tokenizer.ggml.tokens"]
    names = [bytes(tokens.parts[i]).decode() for i in tokens.data]
    assert len(names) == len(set(names)) and "<0x41>" in names and names[:3] == ["<unk>", "<s>", "</s>"]
    assert {t.name for t in reader.tensors} >= {"token_embd.weight", "output.weight", "blk.1.ffn_up.weight"}


def test_the_model_folder_carries_the_same_vocabulary_for_benchmark_clients_and_a_text(tmp_path):
    import json

    import gguf

    folder = tmp_path / "tiny"
    subprocess.run([sys.executable, str(ROOT / "scripts/make-tiny-gguf.py"), "--dir", str(folder)], check=True)
    assert sorted(p.name for p in folder.iterdir()) == ["book.txt", "tiny.gguf", "tokenizer.json",
                                                        "tokenizer_config.json"]
    reader = gguf.GGUFReader(folder / "tiny.gguf")
    tokens = reader.fields["tokenizer.ggml.tokens"]
    names = [bytes(tokens.parts[i]).decode() for i in tokens.data]
    model = json.loads((folder / "tokenizer.json").read_text())["model"]
    assert model["type"] == "Unigram" and model["byte_fallback"] is True
    assert [piece for piece, _ in model["vocab"]] == names
    words = (folder / "book.txt").read_text().split()
    assert len(words) > 50000  # prompts of a few thousand tokens need no download
