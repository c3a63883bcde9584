"""Which layers the byte-reading checks (kernels, runtime closure) have nothing to read in: the
layers a registry-cache verdict's key leaves out (registrycache/inert.py). A layer is judged from its
bytes; anything the checks could read, or that could change what they read below it, is not
inert."""

from __future__ import annotations

import io
import tarfile

import pytest

from enginebuild.io.store import Store
from enginebuild.registrycache.inert import LIMIT, inert, said


def _layer(store: Store, *entries: tuple[str, bytes | None, bytes]) -> str:
    """(name, file bytes or None, tar type) -> the stored blob's sha256."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, kind in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "elsewhere"
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return store.put_bytes(buffer.getvalue(), "a layer").sha256


def test_a_layer_of_patched_python_files_is_inert_and_the_answer_is_kept(tmp_path):
    store = Store(tmp_path / "home")
    sha = _layer(store, ("usr/lib/python3/site-packages/vllm/", None, tarfile.DIRTYPE),
                 ("usr/lib/python3/site-packages/vllm/runner.py", b"x = 1\n", tarfile.REGTYPE),
                 ("usr/lib/python3/site-packages/vllm-0.21.0.dist-info/RECORD", b"a,b,1\n", tarfile.REGTYPE))
    assert inert(store, sha) is True
    store.path(sha).unlink()  # answered from what was kept, not the bytes
    assert inert(store, sha) is True


@pytest.mark.parametrize("entry", [
    ("usr/bin/engine", b"\x7fELF" + b"\0" * 60, tarfile.REGTYPE),  # an executable the closure reads
    ("usr/lib/libtext.so.1", b"not a library\n", tarfile.REGTYPE),  # a file named as a library
    ("usr/lib/libtext.so", b"INPUT(-lother)\n", tarfile.REGTYPE),  # a linker script, named as one
    ("usr/lib/.wh.libold.so.1", b"", tarfile.REGTYPE),  # a whiteout: a library deleted
    ("usr/lib/.wh..wh..opq", b"", tarfile.REGTYPE),  # an opaque folder: all below deleted
    ("usr/lib/libz.so.1", None, tarfile.SYMTYPE),  # a link: what a name resolves to
    ("usr/lib/hard", None, tarfile.LNKTYPE),
])
def test_a_layer_the_checks_could_read_something_in_is_not_inert(tmp_path, entry):
    store = Store(tmp_path / "home")
    sha = _layer(store, ("opt/app/run.py", b"print(1)\n", tarfile.REGTYPE), entry)
    assert inert(store, sha) is False


def test_a_large_layer_is_read_by_the_checks_and_a_layer_neither_held_nor_described_is_unknown(tmp_path):
    store = Store(tmp_path / "home")
    big = _layer(store, ("opt/data.txt", b"a" * (LIMIT + 1), tarfile.REGTYPE))
    assert inert(store, big) is False
    absent = "0" * 64
    assert inert(store, absent) is None
    said(store, absent)  # a trusted description's word, for a layer whose bytes are elsewhere
    assert inert(store, absent) is True
