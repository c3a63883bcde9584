"""Build contexts are the same bytes on any machine, whatever the file times or umask."""
import hashlib
import io
import os
import tarfile

from enginebuild.context import ContextItem, tar_directory, write_context


def context_bytes(items, dockerfile="FROM scratch\n"):
    buffer = io.BytesIO()
    write_context(buffer, dockerfile, items, lambda item: item.data if item.data is not None else item.path)
    return buffer.getvalue()


def test_the_same_files_with_other_times_and_modes_on_disk_make_the_same_context(tmp_path):
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
        item = ContextItem("files/opt/x/launch.sh", "d", mode=0o755, path=script)
        digests.append(hashlib.sha256(context_bytes([item])).hexdigest())
    assert digests[0] == digests[1]


def test_context_entries_are_sorted_owned_by_root_and_dated_at_the_epoch():
    items = [ContextItem("b/2", "x", data=b"2"), ContextItem("a/1", "y", data=b"1", mode=0o755)]
    with tarfile.open(fileobj=io.BytesIO(context_bytes(items))) as tar:
        members = tar.getmembers()
    assert [m.name for m in members] == ["Dockerfile", "a", "a/1", "b", "b/2"]
    assert {(m.uid, m.gid, m.mtime) for m in members} == {(0, 0, 0)}
    assert members[2].mode == 0o755 and members[4].mode == 0o644


def test_a_source_folder_tars_identically_from_two_clones(tmp_path):
    outs = []
    for n in (1, 2):
        folder = tmp_path / f"src{n}"
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "a.c").write_text("int a;\n")
        (folder / "b.h").write_text("int b;\n")
        os.utime(folder / "b.h", (n * 1000, n * 1000))
        outs.append(tar_directory(folder, "engine"))
    assert outs[0] == outs[1]
