"""The strict applier: exact context, offsets reported, conflicts explained."""
import textwrap

from enginebuild.patches.apply import Text, apply_file
from enginebuild.patches.patchfile import parse_patch

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
