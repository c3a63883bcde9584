"""The lock's reader of wheels' file lists (lock/wheelfiles.py) is bounded, whatever the server:
one that ignores Range and sends more than the wheel's size is cut at that size, and a central
directory of more members than a wheel has is refused before it is read. Real files served by a
real HTTP server on 127.0.0.1 (which ignores Range, as some indexes do)."""
from __future__ import annotations

import io
import struct
import zipfile

import pytest

from helpers.www import Server


@pytest.fixture
def said():
    """What the reader says, into a stream of the test's own."""
    from enginebuild.io.progress import configure

    stream = io.StringIO()
    configure(stream=stream, live=False)
    yield stream
    configure()


@pytest.fixture
def served(tmp_path):
    server = Server(tmp_path)
    yield tmp_path, server.url
    server.close()


def pin(url: str, filename: str, size: int):
    from enginebuild.lock.pins import PyPin

    return PyPin("x", "1.0", "index", filename=filename, url=f"{url}/{filename}", sha256="0" * 64, size=size)


def small_wheel() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr("x/__init__.py", b"VALUE = 1\n")
        zipped.writestr("x-1.0.dist-info/METADATA", b"Name: x\nVersion: 1.0\n")
    return buffer.getvalue()


def test_a_wheel_served_whole_is_read_and_its_files_listed(served):
    from enginebuild.io.http import Http
    from enginebuild.lock.wheelfiles import wheel_files

    folder, url = served
    data = small_wheel()
    (folder / "x-1.0-py3-none-any.whl").write_bytes(data)
    found = wheel_files(Http(attempts=1), pin(url, "x-1.0-py3-none-any.whl", len(data)))
    assert found is not None and set(found) == {"site/x/__init__.py"}


def test_a_server_sending_more_than_the_wheels_size_is_cut_at_that_size(served, said):
    from enginebuild.io.http import Http
    from enginebuild.lock.wheelfiles import wheel_files

    folder, url = served
    data = small_wheel()
    with open(folder / "big-1.0-py3-none-any.whl", "wb") as handle:  # 256 MiB where the index says 774 bytes
        handle.write(data)
        handle.truncate(256 << 20)
    assert wheel_files(Http(attempts=1), pin(url, "big-1.0-py3-none-any.whl", len(data))) is None
    assert f"the server sent more than the file's {len(data)} bytes" in said.getvalue()


def test_a_central_directory_of_more_members_than_a_wheel_has_is_refused_unread(served, said):
    from enginebuild.io.http import Http
    from enginebuild.lock.wheelfiles import MAX_ENTRIES, wheel_files

    folder, url = served
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr("x/m0.py", b"")
    # its end records say what a wheel of MAX_ENTRIES + 1 members would (zip64, as one that big is):
    # the count is all that is read before the refusal
    data = buffer.getvalue()
    end = data.rindex(b"PK\x05\x06")
    directory_size, directory_at = struct.unpack("<II", data[end + 12:end + 20])
    record = struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, MAX_ENTRIES + 1, MAX_ENTRIES + 1,
                         directory_size, directory_at)
    locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, end, 1)
    tail = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    buffer = io.BytesIO(data[:end] + record + locator + tail)
    (folder / "many-1.0-py3-none-any.whl").write_bytes(buffer.getvalue())
    assert wheel_files(Http(attempts=1), pin(url, "many-1.0-py3-none-any.whl", len(buffer.getvalue()))) is None
    assert f"its central directory lists {MAX_ENTRIES + 1} members" in said.getvalue()
