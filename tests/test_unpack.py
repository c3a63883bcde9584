"""What an archive may expand to is bounded: a bomb is stopped before it is written, naming the
archive and the limit; a source that really is large says so; a full disk is named as the disk."""
import gzip
import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from conftest import run_cli
from enginebuild.errors import FetchError
from enginebuild.io.store import Store
from enginebuild.io.unpack import MIN_LIMIT, Budget, parse_size
from enginebuild.sources.trees import ArchiveTree, archive_to_tree
from helpers.specs import BUSYBOX_BUILDER, write_image
from helpers.www import Server


def bomb(path: Path, declared: int) -> Path:
    """A 1 KB tar.gz whose one member declares `declared` bytes (what a bomb's headers say)."""
    info = tarfile.TarInfo("pkg-1.0/huge.bin")
    info.size = declared
    path.write_bytes(gzip.compress(info.tobuf(tarfile.PAX_FORMAT), mtime=0))
    return path


def zeros(path: Path, size: int) -> Path:
    """A real tar.gz of `size` zero bytes: tiny packed, large unpacked."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("pkg-1.0/zeros.bin")
        info.size = size
        tar.addfile(info, io.BytesIO(bytes(size)))
        small = tarfile.TarInfo("pkg-1.0/setup.py")
        small.size = 5
        tar.addfile(small, io.BytesIO(b"pass\n"))
    path.write_bytes(gzip.compress(raw.getvalue(), compresslevel=9, mtime=0))
    return path


def test_sizes_read_as_people_write_them():
    assert parse_size("8GiB") == 8 << 30 and parse_size("500MB") == 500 * 10**6 and parse_size(1024) == 1024
    with pytest.raises(Exception, match="not a size"):
        parse_size("lots")


def test_a_bomb_is_stopped_by_its_headers_before_anything_is_written(tmp_path):
    archive = bomb(tmp_path / "pkg-1.0.tar.gz", 2 << 30)
    store = Store(tmp_path / "home")
    with pytest.raises(FetchError) as info:
        archive_to_tree(store, archive, "pkg-1.0.tar.gz", 1)
    assert "pkg-1.0.tar.gz: unpacks to more than 1.0 GiB" in info.value.message
    assert "max-unpacked" in info.value.hint
    assert not any(p.is_file() for p in (tmp_path / "home").rglob("*"))  # no blob, no temporary
    tree = ArchiveTree(archive, hashlib.sha256(archive.read_bytes()).hexdigest(), tmp_path / "home2", "pkg 1.0")
    with pytest.raises(FetchError, match="unpacks to more than"):
        tree.read_many(["huge.bin"])


def test_the_default_bound_grows_with_the_archive_and_a_source_may_set_its_own():
    assert Budget("x", 2 << 20).limit == MIN_LIMIT  # a 2 MB archive: 1 GiB
    assert Budget("x", 35 << 20).limit == 100 * (35 << 20)  # a 35 MB sdist: 3.4 GiB
    assert Budget("x", 1, limit=8 << 30).limit == 8 << 30


@pytest.mark.docker
def test_a_url_source_over_its_max_unpacked_fails_the_build_naming_archive_and_limit(workspace, tmp_path,
                                                                                     docker_engine, debian_reachable):
    www = tmp_path / "www"
    www.mkdir()
    archive = zeros(www / "pkg-1.0.tar.gz", 24 << 20)
    server = Server(www)
    try:
        sha = hashlib.sha256(archive.read_bytes()).hexdigest()
        spec = BUSYBOX_BUILDER + (
            "components:\n  pkg:\n"
            f"    source: {{url: {{url: '{server.url}/pkg-1.0.tar.gz', sha256: {sha}, max-unpacked: 16MiB}}}}\n"
            "    build: {script: build.sh}\n    outputs: {paths: [/out]}\ninstall: [pkg]\n")
        write_image(workspace, "bomb", spec, {"build.sh": "#!/bin/sh\nmkdir -p /out\n"})
        assert run_cli(["lock", "bomb"], workspace).returncode == 0
        proc = run_cli(["image", "bomb"], workspace)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "pkg-1.0.tar.gz: unpacks to more than 16.0 MiB, its source's max-unpacked" in proc.stderr
        bigger = spec.replace("max-unpacked: 16MiB", "max-unpacked: 64MiB")
        write_image(workspace, "bomb", bigger, {"build.sh": "#!/bin/sh\nmkdir -p /out\n"})
        assert run_cli(["image", "bomb"], workspace).returncode == 0  # the limit is the source's to raise
    finally:
        server.close()


def test_a_full_disk_while_unpacking_names_the_disk_not_the_archive(tmp_path, small_disk):
    from enginebuild.errors import EngineBuildError

    archive = zeros(tmp_path / "pkg-1.0.tar.gz", 8 << 20)  # 8 MiB unpacked, on a 3 MiB disk
    with pytest.raises(EngineBuildError) as info:
        archive_to_tree(Store(small_disk), archive, "pkg-1.0.tar.gz", 1)
    assert f"no space left on the device holding {small_disk}" in info.value.message
    assert "cannot read" not in info.value.message
    assert not [p for p in small_disk.rglob("*") if p.is_file()]  # nothing partial kept


def test_a_wheel_that_declares_more_than_its_bound_is_not_installed(tmp_path):
    import zipfile

    from enginebuild.io.tars import TarWriter
    from enginebuild.layerkinds.installer import install_wheel

    wheel = tmp_path / "bomb-1.0-py3-none-any.whl"
    block = bytes(1 << 20)
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zipped:
        with zipped.open("bomb/zeros.bin", "w", force_zip64=True) as member:
            for _ in range(MIN_LIMIT // len(block) + 16):  # just past the 1 GiB floor, a few MB packed
                member.write(block)
        zipped.writestr("bomb-1.0.dist-info/METADATA", "Name: bomb\nVersion: 1.0\n")
    assert wheel.stat().st_size < 16 << 20
    with pytest.raises(FetchError, match="bomb-1.0-py3-none-any.whl: unpacks to more than 1.0 GiB"):
        install_wheel(wheel, wheel.name, "/usr/lib/python3/dist-packages", "/usr/bin/python3",
                      TarWriter(io.BytesIO()))
