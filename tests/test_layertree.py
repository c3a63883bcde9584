"""Layers written into a host folder (`image --output`) touch nothing outside it, whatever the
layer says: a whiteout of `.` or `..`, a sparse entry that would write far more than the layer
holds, a full disk named as the folder's disk."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from enginebuild.errors import BuildFailed
from enginebuild.io.files import DiskFull, write_folder
from enginebuild.io.layertree import LayerTree


def layer(*entries: tuple[str, bytes]) -> io.BytesIO:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, body in entries:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    data.seek(0)
    return data


@pytest.fixture
def beside(tmp_path) -> Path:
    """The folder that holds the output folder, with a file of the user's in it."""
    (tmp_path / "users-file").write_text("keep me")
    return tmp_path


@pytest.mark.parametrize("name", [".wh...", ".wh..", ".wh.", "sub/.wh...", "./.wh..."])
def test_a_whiteout_of_dot_or_dotdot_is_refused_and_deletes_nothing(beside, name):
    def fill(folder: Path) -> None:
        tree = LayerTree(folder, "--output e=out")
        tree.add(layer(("sub/a", b"a"), ("b", b"b")))
        tree.add(layer((name, b"")))

    with pytest.raises(BuildFailed, match="names no file in its folder"):
        write_folder(beside / "out", fill)
    assert (beside / "users-file").read_text() == "keep me"
    assert not (beside / "out").exists() and [p.name for p in beside.iterdir()] == ["users-file"]


def test_whiteouts_still_delete_what_layers_below_wrote(tmp_path):
    tree = LayerTree(tmp_path / "out")
    (tmp_path / "out").mkdir()
    tree.add(layer(("sub/a", b"a"), ("sub/b", b"b"), ("c", b"c")))
    tree.add(layer(("sub/.wh.a", b""), (".wh.c", b"")))
    tree.finish()
    assert sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*")) == ["sub", "sub/b"]


def sparse_layer(size: int) -> io.BytesIO:
    """A GNU sparse entry: a few bytes stored, `size` bytes long when written out."""
    data = io.BytesIO()
    info = tarfile.TarInfo("big")
    info.type = tarfile.GNUTYPE_SPARSE
    info.size = 4
    header = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    # the old GNU header's sparse map (offset 386): one extent (offset size-4, 4 bytes); real size at 483
    header[386:398] = f"{size - 4:011o}\0".encode()
    header[398:410] = f"{4:011o}\0".encode()
    header[483:495] = f"{size:011o}\0".encode()
    header[148:156] = b"        "
    header[148:156] = f"{sum(header):06o}\0 ".encode()
    data.write(bytes(header) + b"data" + b"\0" * 508 + b"\0" * 1024)
    data.seek(0)
    return data


def test_a_sparse_entry_is_refused_before_anything_is_written(tmp_path):
    source = sparse_layer(3 << 30)
    with tarfile.open(fileobj=source) as tar:
        assert tar.getmembers()[0].issparse() and tar.getmembers()[0].size == 3 << 30
    source.seek(0)
    with pytest.raises(BuildFailed, match="'big' is a sparse file of 3221225472 bytes; refused"):
        write_folder(tmp_path / "out", lambda folder: LayerTree(folder).add(source))
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_named_as_the_output_folders_disk(small_disk):
    big = layer(("a", b"x" * (4 << 20)))
    with pytest.raises(DiskFull, match=f"no space left on the device holding {small_disk}"):
        write_folder(small_disk / "out", lambda folder: LayerTree(folder).add(big))
    assert list(small_disk.iterdir()) == []
