"""Deterministic tars: the same files give the same bytes on any machine, whatever the file
times, owners or umask; layers carry no implied parent folders (they would reset /tmp)."""
import hashlib
import io
import os
import tarfile

from enginebuild.io.tars import TarWriter, folder_tar, normal_info


def tar_bytes(write, **kw) -> bytes:
    buffer = io.BytesIO()
    writer = TarWriter(buffer, **kw)
    write(writer)
    writer.close()
    return buffer.getvalue()


def test_the_same_files_with_other_times_and_umasks_on_disk_make_the_same_tar(tmp_path):
    digests = []
    for umask, mtime in ((0o022, 1_000_000), (0o002, 2_000_000_000)):
        old = os.umask(umask)
        try:
            folder = tmp_path / f"clone-{umask:o}"
            folder.mkdir()
            script = folder / "launch.sh"
            script.write_text("echo hi\n")
            os.utime(script, (mtime, mtime))
        finally:
            os.umask(old)
        digests.append(hashlib.sha256(tar_bytes(lambda w, s=script: w.add_file("opt/x/launch.sh", s, 0o755)))
                       .hexdigest())
    assert digests[0] == digests[1]


def test_entries_carry_the_given_time_numeric_owners_and_no_owner_names():
    data = tar_bytes(lambda w: (w.add_bytes("b/2", b"2"), w.add_bytes("a/1", b"1", 0o755)), mtime=7,
                     implied_dirs=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["b", "b/2", "a", "a/1"]
    assert {(m.uid, m.gid, m.mtime, m.uname, m.gname) for m in members} == {(0, 0, 7, "", "")}
    assert members[3].mode == 0o755 and members[1].mode == 0o644


def test_a_layer_writes_no_folder_it_was_not_given_so_it_never_resets_tmp():
    data = tar_bytes(lambda w: w.add_bytes("tmp/x", b"x"))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert [m.name for m in tar.getmembers()] == ["tmp/x"]


def test_pax_headers_keep_extended_attributes_and_drop_times():
    info = normal_info("usr/bin/ping", size=0, pax={"SCHILY.xattr.security.capability": "x", "atime": "1.5",
                                                   "ctime": "2.5"})
    assert info.pax_headers == {"SCHILY.xattr.security.capability": "x"}


def test_a_source_folder_tars_identically_from_two_clones(tmp_path):
    outs = []
    for n in (1, 2):
        folder = tmp_path / f"src{n}"
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "a.c").write_text("int a;\n")
        (folder / "b.h").write_text("int b;\n")
        os.utime(folder / "b.h", (n * 1000, n * 1000))
        outs.append(folder_tar(folder, "engine"))
    assert outs[0] == outs[1]
