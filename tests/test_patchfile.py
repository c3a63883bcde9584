"""Loading a patch lints it: each problem is an error naming the patch file (and line)."""
import textwrap

import pytest

from enginebuild.core.patchfile import PatchError, parse_patch

HEADER = "Subject: s\nDescription: d\nUpstream: https://example.invalid/pr/1\nFixed-In: 0.22.0, commit c628a93a64\n---\n"
DIFF = textwrap.dedent("""\
    diff --git a/pkg/mod.py b/pkg/mod.py
    --- a/pkg/mod.py
    +++ b/pkg/mod.py
    @@ -1,3 +1,3 @@
     a
    -b
    +B
     c
    """)


def error(text: str) -> str:
    with pytest.raises(PatchError) as info:
        parse_patch("vllm/0001-x.patch", text.encode())
    return info.value.message


def test_a_well_formed_patch_parses_with_its_header_and_hunks():
    patch = parse_patch("vllm/0001-x.patch", (HEADER + DIFF).encode())
    assert patch.subject == "s"
    assert patch.fixed_in == {"version": "0.22.0", "commit": "c628a93a64"}
    (file_patch,) = patch.files
    assert file_patch.path == "pkg/mod.py"
    assert file_patch.hunks[0].old_lines == ["a", "b", "c"] and file_patch.hunks[0].new_lines == ["a", "B", "c"]


@pytest.mark.parametrize("fixed_in,expected", [
    ("commit 5723463658", {"commit": "5723463658"}),  # an abbreviated commit may be all digits
    ("0.22.0 (commit 1234567890)", {"version": "0.22.0", "commit": "1234567890"}),
    ("5723463658", {"version": "5723463658"}),  # digits alone, not said to be a commit: a version
    ("fixed in v1.3", {"version": "1.3"}),
])
def test_fixed_in_reads_what_follows_commit_as_a_commit(fixed_in, expected):
    patch = parse_patch("vllm/0001-x.patch", (HEADER.replace("0.22.0, commit c628a93a64", fixed_in) + DIFF).encode())
    assert patch.fixed_in == expected


def test_a_bare_diff_is_taken_and_says_what_it_lacks():
    for text in (DIFF, DIFF.split("\n", 1)[1]):  # git diff, and diff -u (no `diff --git` line)
        patch = parse_patch("vllm/0001-x.patch", text.encode())
        assert patch.header == {} and patch.lacks == ("Subject", "Description", "Upstream")
        assert patch.files[0].path == "pkg/mod.py" and patch.files[0].hunks[0].new_lines == ["a", "B", "c"]


FORMAT_PATCH = """\
From 2b6133a8ce394c2df0d2172da6112d14c4240827 Mon Sep 17 00:00:00 2001
From: T <t@example.invalid>
Date: Fri, 27 Nov 2026 19:50:23 +0000
Subject: [PATCH 2/3] Fix the b line, which was
 wrong since the start

It was wrong; this is why.

Second paragraph.
---
 pkg/mod.py | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

""" + DIFF + "-- \n2.39.5\n"


def test_a_mail_of_git_format_patch_gives_its_subject_and_message():
    patch = parse_patch("vllm/0001-x.patch", FORMAT_PATCH.encode())
    assert patch.subject == "Fix the b line, which was wrong since the start"
    assert patch.header["Description"] == "It was wrong; this is why.\n\nSecond paragraph."
    assert patch.lacks == ("Upstream",)
    (file_patch,) = patch.files
    assert file_patch.path == "pkg/mod.py" and file_patch.hunks[0].new_lines == ["a", "B", "c"]


def test_a_header_missing_a_required_field_is_named():
    assert error("Subject: s\nUpstream: u\n---\n" + DIFF) == "patches/vllm/0001-x.patch: header lacks Description"


def test_absolute_paths_are_refused():
    text = HEADER + DIFF.replace("--- a/pkg/mod.py", "--- /etc/passwd")
    assert error(text) == ("patches/vllm/0001-x.patch:7: absolute path '/etc/passwd': "
                           "patches must name paths inside the tree")


def test_paths_leaving_the_tree_are_refused():
    text = HEADER + DIFF.replace("a/pkg/mod.py", "a/../../etc/cron.d/x").replace("b/pkg/mod.py", "b/../../etc/cron.d/x")
    assert "leaves the tree" in error(text)


def test_paths_into_git_metadata_are_refused():
    text = HEADER + DIFF.replace("pkg/mod.py", ".git/hooks/post-checkout")
    assert "is not allowed" in error(text)


def test_symlinks_are_refused():
    text = HEADER + "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+/etc/passwd\n"
    assert error(text) == ("patches/vllm/0001-x.patch:7: the patch creates or changes a symlink; "
                           "patches may only write regular files")


def test_a_binary_change_without_its_data_or_with_damaged_data_is_refused_naming_it():
    without = HEADER + "diff --git a/x.bin b/x.bin\nindex 1111111..2222222 100644\nBinary files a/x.bin and b/x.bin differ\n"
    assert "a binary file's change without its data" in error(without) and "git diff --binary" in error(without)
    damaged = HEADER + "diff --git a/x.bin b/x.bin\nGIT binary patch\nliteral 1\nHcmZ?d00001\n\n"
    assert "patches/vllm/0001-x.patch:8: the binary patch is damaged: " in error(damaged)
    short_index = HEADER + ("diff --git a/x.bin b/x.bin\nindex f76dd23..bdc955b 100644\nGIT binary patch\nliteral 2\n"
                            "JcmZQz1ONa700IC2\n\nliteral 1\nIcmZPo000310RR91\n\n")
    assert "needs the full index line" in error(short_index)


def test_a_hunk_shorter_than_its_header_is_refused_with_its_line():
    text = HEADER + DIFF.replace("@@ -1,3 +1,3 @@", "@@ -1,4 +1,4 @@")
    assert error(text) == ("patches/vllm/0001-x.patch:9: hunk @@ -1,4 +1,4 @@ ends early "
                           "(3/4 old, 3/4 new lines)")


def test_a_garbled_hunk_line_is_refused():
    text = HEADER + DIFF.replace(" c\n", "*c\n")
    assert "malformed hunk line" in error(text)


def test_a_malformed_hunk_header_is_refused():
    assert "malformed hunk header" in error(HEADER + DIFF.replace("@@ -1,3 +1,3 @@", "@@ -1,3 @@"))


def test_paths_that_differ_without_rename_or_copy_lines_are_refused():
    text = HEADER + DIFF.replace("+++ b/pkg/mod.py", "+++ b/pkg/other.py")
    assert "the section's paths differ (pkg/mod.py -> pkg/other.py) without rename or copy lines" in error(text)


def test_renames_and_copies_are_read_with_or_without_changes_the_similarity_ignored():
    pure = "diff --git a/old.py b/new.py\nsimilarity index 100%\nrename from old.py\nrename to new.py\n"
    (moved,) = parse_patch("vllm/0001-x.patch", (HEADER + pure).encode()).files
    assert (moved.old_path, moved.new_path, moved.hunks, moved.copy, moved.moves) == ("old.py", "new.py", (), False, True)
    changed = ("diff --git a/pkg/mod.py b/pkg/new.py\nsimilarity index 60%\ncopy from pkg/mod.py\ncopy to pkg/new.py\n"
               + DIFF.split("\n", 1)[1].replace("+++ b/pkg/mod.py", "+++ b/pkg/new.py"))
    (copied,) = parse_patch("vllm/0001-x.patch", (HEADER + changed).encode()).files
    assert (copied.old_path, copied.new_path, copied.copy, len(copied.hunks)) == ("pkg/mod.py", "pkg/new.py", True, 1)
    assert copied.reversed().old_path == "pkg/new.py" and copied.reversed().copy  # as git -R: a copy back


def test_a_patch_that_is_not_utf8_is_refused():
    with pytest.raises(PatchError):
        parse_patch("x.patch", b"Subject: \xff\n")


def test_what_git_accepts_is_read_a_mode_change_alone_a_file_twice_and_bytes_of_any_encoding():
    mode_only = "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"
    (change,) = parse_patch("vllm/0001-x.patch", (HEADER + mode_only).encode()).files
    assert (change.old_path, change.new_path, change.hunks, change.old_mode, change.new_mode) == \
        ("run.sh", "run.sh", (), 0o644, 0o755)
    twice = parse_patch("vllm/0001-x.patch", (HEADER + DIFF + DIFF.replace("-b\n+B", "-B\n+b")).encode())
    assert [f.path for f in twice.files] == ["pkg/mod.py", "pkg/mod.py"]
    assert [f.hunks[0].new_lines for f in twice.reversed().files] == [["a", "B", "c"], ["a", "b", "c"]]
    latin1 = parse_patch("vllm/0001-x.patch", HEADER.encode() + DIFF.replace("-b\n+B", "-caf\xe9\n+cafe")
                         .encode("latin-1"))
    assert latin1.files[0].hunks[0].old_lines[1].encode("utf-8", "surrogateescape") == b"caf\xe9"


def test_quoted_paths_are_decoded_as_git_quotes_them_and_non_utf8_names_stay_refused():
    quoted = DIFF.replace("--- a/pkg/mod.py", '--- "a/pkg/m\\303\\266d.py"').replace(
        "+++ b/pkg/mod.py", '+++ "b/pkg/m\\303\\266d.py"').replace("diff --git a/pkg/mod.py b/pkg/mod.py",
                                                                   'diff --git "a/pkg/m\\303\\266d.py" "b/pkg/m\\303\\266d.py"')
    (change,) = parse_patch("vllm/0001-x.patch", (HEADER + quoted).encode()).files
    assert change.path == "pkg/m\u00f6d.py"
    spaced = 'diff --git "a/with tab\\there.py" "b/with tab\\there.py"\nnew file mode 100644\n'
    assert "is not allowed" in error(HEADER + spaced)  # a control character in a name: never a path here
    with pytest.raises(PatchError) as info:
        parse_patch("vllm/0001-x.patch", HEADER.encode() + DIFF.replace("mod.py", "m\xf6d.py").encode("latin-1"))
    assert "a path that is not UTF-8" in info.value.message
    with pytest.raises(PatchError) as info:
        parse_patch("vllm/0001-x.patch", (HEADER + DIFF.replace("--- a/pkg/mod.py", '--- "a/pkg/m\\377.py"')).encode())
    assert "a path that is not UTF-8 (quoted or not)" in info.value.message


def _base85_lines(data: bytes) -> str:
    """git's data lines: a length character, then base85 of up to 52 bytes."""
    from enginebuild.core.gitbinary import _ALPHABET

    out = []
    for i in range(0, len(data), 52):
        chunk = data[i:i + 52]
        padded = chunk + b"\0" * (-len(chunk) % 4)
        text = bytearray()
        for j in range(0, len(padded), 4):
            value = int.from_bytes(padded[j:j + 4], "big")
            digits = []
            for _ in range(5):
                value, digit = divmod(value, 85)
                digits.append(_ALPHABET[digit])
            text += bytes(reversed(digits))
        head = chr(ord("A") + len(chunk) - 1) if len(chunk) <= 26 else chr(ord("a") + len(chunk) - 27)
        out.append(head + text.decode())
    return "\n".join(out) + "\n"


def binary_patch(kind: str, size: int, payload: bytes) -> str:
    import zlib

    return HEADER + (f"diff --git a/x.bin b/x.bin\nindex {'1' * 40}..{'2' * 40} 100644\nGIT binary patch\n"
                     f"{kind} {size}\n" + _base85_lines(zlib.compress(payload, 6)) + "\n")


def test_binary_patch_data_inflates_no_further_than_its_stated_size():
    """A zlib literal that states a small size but inflates to 64 MiB (a patch is another party's
    text) is refused after inflating one byte more than stated, never in full."""
    import tracemalloc

    bomb = b"\0" * (64 << 20)
    text = binary_patch("literal", 100, bomb)
    assert len(text) < 1 << 20
    tracemalloc.start()
    try:
        message = error(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "inflates to more than the 100 bytes it states" in message
    assert peak < 16 << 20, f"{peak >> 20} MiB to refuse it"
    huge = binary_patch("literal", 3 << 30, b"x")
    assert f"it states {3 << 30} bytes; a binary patch of enginebuild's carries at most" in error(huge)


def test_a_delta_makes_no_more_than_it_states_nor_more_than_the_limit():
    from enginebuild.core.gitbinary import MAX_BYTES, BinaryPatchError, apply_delta

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not out[-1] & 0x80:
                return bytes(out)

    old = b"x" * 0x10000
    copy_all = bytes([0x80])  # copy 0x10000 bytes from offset 0: one byte each
    with pytest.raises(BinaryPatchError, match="makes more than the 65536 bytes it states"):
        apply_delta(old, varint(len(old)) + varint(0x10000) + copy_all * 1000)
    with pytest.raises(BinaryPatchError, match=f"makes {2 << 30} bytes; .* at most {MAX_BYTES}"):
        apply_delta(old, varint(len(old)) + varint(2 << 30) + copy_all * 32768)
    with pytest.raises(BinaryPatchError, match="ends inside a copy instruction"):
        apply_delta(old, varint(len(old)) + varint(4) + bytes([0x91]))
    assert apply_delta(old, varint(len(old)) + varint(0x20000) + copy_all * 2) == old * 2
