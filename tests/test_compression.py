"""Layers are gzipped side by side when pushed: the bytes (and so the digests a registry and a
reproduce run see) are those of one layer at a time with the standard library's gzip."""

from __future__ import annotations

import gzip
import hashlib
import io
import random
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from enginebuild.io.store import Store, make_blob
from enginebuild.oci.image import Layer
from enginebuild.oci.push import GZIP_LEVEL, compressed


def layer_tar(seed: int) -> bytes:
    """A layer of a few MiB, part random (incompressible), part text."""
    rng = random.Random(seed)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for i in range(4):
            data = rng.randbytes(512 * 1024) + f"line {i} of a text file\n".encode() * 20000
            info = tarfile.TarInfo(f"opt/layer{seed}/file{i}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def stored(home: Path, datas: list[bytes]) -> tuple[Store, list[Layer]]:
    store = Store(home)
    layers = []
    for data in datas:
        blob = make_blob(store, "layer", lambda sink, data=data: sink.write(data))
        layers.append(Layer(f"sha256:{blob.sha256}", blob.size, "test layer", blob.sha256))
    return store, layers


def one_at_a_time(data: bytes) -> str:
    """The digest enginebuild's layers have always had: gzip level 6, no name, no time."""
    sink = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=GZIP_LEVEL, fileobj=sink, mtime=0) as out:
        out.write(data)
    return hashlib.sha256(sink.getvalue()).hexdigest()


def twice_side_by_side(tmp_path: Path, datas: list[bytes], kind, record: str, unpack) -> list[list[str]]:
    """Two stores each compress `datas` side by side with `kind`: each layer's compressed form is
    recorded under `record` (not zlib's gzip's), unpacks to the layer and is smaller; the two runs'
    digests are the same."""
    runs = []
    for run in range(2):
        store, layers = stored(tmp_path / f"home{run}", datas)
        with ThreadPoolExecutor(max_workers=len(layers)) as pool:
            runs.append([sha for sha, _ in pool.map(compressed, [store] * len(layers), layers, [kind] * len(layers))])
        for layer, sha, data in zip(layers, runs[-1], datas, strict=True):
            assert store.record(record, str(layer.blob)) is not None and store.record("gzip", str(layer.blob)) is None
            body = store.path(sha).read_bytes()
            assert unpack(body) == data and len(body) < len(data)
    assert runs[0] == runs[1]
    return runs


def test_layers_compressed_side_by_side_are_byte_identical_to_one_at_a_time(tmp_path: Path) -> None:
    datas = [layer_tar(seed) for seed in range(6)]
    expected = [one_at_a_time(d) for d in datas]
    runs = []
    for run in range(2):
        store, layers = stored(tmp_path / f"home{run}", datas)
        with ThreadPoolExecutor(max_workers=len(layers)) as pool:
            runs.append([sha for sha, _ in pool.map(compressed, [store] * len(layers), layers)])
        for layer in layers:  # each compressed digest made once and recorded
            record = store.record("gzip", str(layer.blob))
            assert record is not None and store.path(str(record["sha256"])).stat().st_size == int(record["size"])
    assert runs[0] == runs[1] == expected


def test_zstd_layers_are_the_same_bytes_on_every_run_and_unpack_to_the_layer(tmp_path: Path) -> None:
    """`push --compression zstd`: one frame per layer from the pinned zstandard, level 3, one thread;
    two stores compressing side by side get the same digests, recorded apart from the gzip ones,
    and each unpacks to the layer's own tar (its diff ID)."""
    import zstandard

    from enginebuild.oci.push import COMPRESSIONS

    datas = [layer_tar(seed) for seed in range(4)]
    runs = twice_side_by_side(tmp_path, datas, COMPRESSIONS["zstd"], "zstd-3",
                              lambda body: zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body)).read())
    assert set(runs[0]).isdisjoint(one_at_a_time(d) for d in datas)


def test_isal_gzip_layers_are_the_same_bytes_on_every_run_and_machine_and_unpack_with_any_gzip(tmp_path: Path) -> None:
    """`--compression gzip-isal`: gzip made by the pinned ISA-L, level 2, fed fixed 1 MiB blocks.
    Two stores compressing side by side get the same digests, recorded under a kind naming the
    library's version and level (apart from zlib's), each unpacks with the standard library to the
    layer, and a fixed input gives the digest pinned here (the same on an AVX2 AMD and an AVX-512
    Intel machine: ISA-L's code paths do not change its output)."""
    import isal

    from enginebuild.oci.push import COMPRESSIONS, ISAL_LEVEL

    fast = COMPRESSIONS["gzip-isal"]
    assert fast.record == f"gzip-isal-{isal.__version__}-{ISAL_LEVEL}" and fast.media_type == COMPRESSIONS["gzip"].media_type
    rng = random.Random(7)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    text = b" ".join(rng.choice(words) for _ in range(1_000_000))
    datas = [layer_tar(seed) for seed in range(3)] + [text]
    runs = twice_side_by_side(tmp_path, datas, fast, fast.record, gzip.decompress)
    assert set(runs[0]).isdisjoint(one_at_a_time(d) for d in datas)
    assert runs[0][-1] == ISAL_TEXT_DIGEST, "the pinned isal no longer gives this digest: say so where it is pinned"


ISAL_TEXT_DIGEST = "ef91c592be7db41aeef9923fb5d38b2dcbc8b4a53171ec9838eefdbe799ac5d5"  # isal 1.9.1, level 2
