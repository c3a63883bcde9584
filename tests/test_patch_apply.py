"""The strict applier: exact context, offsets reported, conflicts explained."""
import textwrap

from enginebuild.core.patchfile import parse_patch
from enginebuild.patches.apply import Text, apply_file

HEADER = "Subject: s\nDescription: d\nUpstream: u\n---\n"


def patch(diff: str):
    return parse_patch("t.patch", (HEADER + textwrap.dedent(diff)).encode())


CHANGE_B = patch("""\
    --- a/f
    +++ b/f
    @@ -2,3 +2,3 @@
     a
    -b
    +B
     c
    """)


def source(lines) -> Text:
    return Text.parse(("\n".join(lines) + "\n").encode())


def test_a_hunk_at_its_place_applies_at_offset_0():
    new, results = apply_file("f", source(["0", "a", "b", "c", "d"]), CHANGE_B.files[0])
    assert [r.offset for r in results] == [0]
    assert new.lines == ["0", "a", "B", "c", "d"]


def test_a_moved_hunk_applies_with_its_offset_reported():
    new, results = apply_file("f", source(["x", "y", "z", "0", "a", "b", "c"]), CHANGE_B.files[0])
    assert [r.offset for r in results] == [3]
    assert new.lines[-3:] == ["a", "B", "c"]


def test_changed_context_is_a_conflict_showing_what_the_source_has():
    new, results = apply_file("f", source(["0", "a", "b2", "c"]), CHANGE_B.files[0])
    assert new is None
    (result,) = results
    assert not result.applied
    assert result.expected == ["a", "b", "c"]
    assert result.found == ["a", "b2", "c"] and result.found_at == 2


def test_whitespace_changes_are_not_fuzzed_away():
    _, results = apply_file("f", source(["0", "a ", "b", "c"]), CHANGE_B.files[0])
    assert not results[0].applied


def test_a_missing_file_is_a_conflict():
    new, results = apply_file("f", None, CHANGE_B.files[0])
    assert results[0].problem == "the file does not exist"


def test_new_files_are_created_and_must_not_exist_yet():
    create = patch("""\
        --- /dev/null
        +++ b/new.txt
        @@ -0,0 +1,2 @@
        +one
        +two
        """)
    new, results = apply_file("new.txt", None, create.files[0])
    assert new.dump() == b"one\ntwo\n"
    _, results = apply_file("new.txt", source(["x"]), create.files[0])
    assert results[0].problem == "the file already exists"


def test_no_newline_at_end_of_file_is_honoured():
    add_newline = patch("""\
        --- a/f
        +++ b/f
        @@ -1 +1 @@
        -last
        \\ No newline at end of file
        +last
        """)
    new, results = apply_file("f", Text.parse(b"last"), add_newline.files[0])
    assert results[0].applied and new.dump() == b"last\n"
    _, results = apply_file("f", Text.parse(b"last\n"), add_newline.files[0])
    assert not results[0].applied


def test_later_hunks_report_offsets_against_the_original_file():
    two = patch("""\
        --- a/f
        +++ b/f
        @@ -1,2 +1,3 @@
         a
        +a2
         b
        @@ -5,2 +6,3 @@
         e
        +e2
         f
        """)
    new, results = apply_file("f", source(["a", "b", "c", "d", "e", "f"]), two.files[0])
    assert [r.offset for r in results] == [0, 0]
    new, results = apply_file("f", source(["a", "b", "c", "d", "X", "e", "f"]), two.files[0])
    assert [r.offset for r in results] == [0, 1]


# -- the cases where enginebuild and git/patch once disagreed: their verdict is the expected one --------

import shutil  # noqa: E402
import subprocess  # noqa: E402

import pytest  # noqa: E402

from conftest import need  # noqa: E402
from enginebuild.core.patchfile import PatchError  # noqa: E402


def git_apply(tmp_path, content: bytes, diff: bytes, *flags) -> tuple[int, bytes]:
    need(shutil.which("git") is not None, "git is not installed")
    repo = tmp_path / "git"
    repo.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "f").write_bytes(content)
    (repo / "p.diff").write_bytes(diff)
    proc = subprocess.run(["git", "apply", *flags, "p.diff"], cwd=repo, capture_output=True)
    return proc.returncode, (repo / "f").read_bytes()


def gnu_patch(tmp_path, content: bytes, diff: bytes) -> tuple[int, bytes]:
    need(shutil.which("patch") is not None, "GNU patch is not installed")
    folder = tmp_path / "gnu"
    folder.mkdir(exist_ok=True)
    (folder / "f").write_bytes(content)
    (folder / "p.diff").write_bytes(diff)
    proc = subprocess.run(["patch", "-p1", "-F0", "-N", "--batch", "-i", "p.diff"], cwd=folder, capture_output=True)
    return proc.returncode, (folder / "f").read_bytes()


def ours(content: bytes, diff: bytes) -> bytes | None:
    parsed = parse_patch("t.patch", HEADER.encode() + diff)
    new, results = apply_file("f", Text.parse(content), parsed.files[0])
    return new.dump() if new is not None and all(r.applied for r in results) else None


def test_a_context_found_twice_at_equal_distance_applies_where_git_and_patch_put_it(tmp_path):
    lines = [f"line {i}" for i in range(1, 241)]
    for at in (153, 211):  # the hunk says 182: both are 29 lines away
        lines[at - 1: at + 2] = ["ctx-a", "old", "ctx-b"]
    content = ("\n".join(lines) + "\n").encode()
    diff = b"--- a/f\n+++ b/f\n@@ -182,3 +182,3 @@\n ctx-a\n-old\n+new\n ctx-b\n"
    code, by_git = git_apply(tmp_path, content, diff)
    code_p, by_patch = gnu_patch(tmp_path, content, diff)
    assert code == 0 and code_p == 0 and by_git == by_patch
    assert ours(content, diff) == by_git  # the later of the two
    assert by_git.decode().splitlines()[211] == "new"


def test_a_context_free_insertion_is_refused_where_git_would_put_it_at_the_end(tmp_path):
    content = b"".join(f"{i}\n".encode() for i in range(1, 11))
    diff = b"--- a/f\n+++ b/f\n@@ -4,0 +5 @@\n+inserted\n"
    code_git, by_git = git_apply(tmp_path, content, diff)
    assert code_git == 0 and by_git.decode().splitlines()[-1] == "inserted"  # git: at the end, not line 5
    assert ours(content, diff) is None  # stricter: refused, never a tree the patch did not mean


def test_a_hunk_expecting_a_final_newline_the_file_lacks_fails_as_in_git(tmp_path):
    content = b"a\nb\nc"
    diff = b"--- a/f\n+++ b/f\n@@ -2,2 +2,2 @@\n b\n-c\n+C\n"
    code, _ = git_apply(tmp_path, content, diff)
    assert code != 0
    assert ours(content, diff) is None


def test_a_patch_file_without_its_final_newline_is_refused_as_git_refuses_it(tmp_path):
    content = b"a\nb\n"
    diff = b"--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B"
    code, _ = git_apply(tmp_path, content, diff)
    assert code != 0
    with pytest.raises(PatchError) as info:
        parse_patch("t.patch", HEADER.encode() + diff)
    assert "does not end with a newline" in info.value.message


def test_an_empty_new_file_is_created_as_git_creates_it(tmp_path):
    diff = b"diff --git a/empty b/empty\nnew file mode 100644\nindex 0000000..e69de29\n"
    parsed = parse_patch("t.patch", HEADER.encode() + diff)
    new, results = apply_file("empty", None, parsed.files[0])
    assert results[0].applied and new is not None and new.dump() == b""
