"""Applying a patch to file contents in memory, strictly: exact context, no fuzz.

The same code decides what `patches check` reports and what a build receives (the build
applies stacks on the host and ships the patched tree), so the two cannot differ.

Where a hunk goes is where `git apply` (without options) puts it, and the corpus in
tests/corpus/patches.json, recorded from git by scripts/record-patch-corpus.py, holds the two
equal:
- the search starts at the hunk's new-side line and goes one line later, one earlier, two
  later, two earlier, ... over the whole file as earlier hunks left it (a hunk may land above
  the one before it);
- a hunk whose old side starts at line 0 or 1 must match at the start of the file, with or
  without leading context; a hunk without trailing context must match at its end;
- a line matches with its newline: a hunk whose old side ends without one matches only the
  file's last line, if that has none either.
One departure, stricter than git: a hunk with no context at all (a `-U0` diff) is refused
where git would put it anywhere but its stated line (git puts a context-free insertion at the
end of the file, whatever line it names), since nothing confirms another place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from enginebuild.core.gitbinary import BinaryPatchError, blob_id
from enginebuild.core.patchfile import FilePatch, Hunk


@dataclass
class Text:
    """A file as lines without terminators, and whether its last line ends in a newline."""

    lines: list[str]
    eof_newline: bool = True

    @classmethod
    def parse(cls, data: bytes) -> Text:
        text = data.decode("utf-8", "surrogateescape")
        if not text:
            return cls([], True)
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()
            return cls(lines, True)
        return cls(lines, False)

    def dump(self) -> bytes:
        if not self.lines:
            return b""
        text = "\n".join(self.lines) + ("\n" if self.eof_newline else "")
        return text.encode("utf-8", "surrogateescape")


@dataclass
class HunkResult:
    file: str
    index: int  # 1-based
    header: str
    offset: int | None = None  # lines moved from where the hunk says; None when it did not apply
    expected: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    found_at: int | None = None  # 1-based line of `found`
    problem: str = ""

    @property
    def applied(self) -> bool:
        return self.offset is not None


def _context(hunk: Hunk) -> tuple[int, int]:
    """(leading, trailing) context lines of a hunk."""
    tags = [tag for tag, _ in hunk.lines]
    leading = next((i for i, t in enumerate(tags) if t != " "), len(tags))
    trailing = next((i for i, t in enumerate(reversed(tags)) if t != " "), len(tags))
    return leading, trailing


def _fits(text: Text, at: int, hunk: Hunk) -> bool:
    """Whether the hunk's old side is the file's lines at `at`, newlines included."""
    lines, old = text.lines, hunk.old_lines
    if at < 0 or at + len(old) > len(lines) or lines[at: at + len(old)] != old:
        return False
    if not old:
        return True
    if at + len(old) == len(lines):
        return hunk.old_eof_newline == text.eof_newline
    return hunk.old_eof_newline


def _anchors(hunk: Hunk) -> tuple[bool, bool]:
    """(must match at the start, must match at the end), as git apply decides them."""
    return hunk.old_start <= 1, _context(hunk)[1] == 0


def _place(text: Text, hunk: Hunk, pos: int, begin: bool, end: bool) -> int | None:
    """git apply's search: from `pos` (or the anchored line), then +1, -1, +2, -2, ..."""
    count, size = len(text.lines), len(hunk.old_lines)
    line = 0 if begin else (count - size if end else pos)
    if line < 0 or line > count:
        line = count

    def fits(at: int) -> bool:
        return (not begin or at == 0) and (not end or at + size == count) and _fits(text, at, hunk)

    backwards = forwards = current = line
    step = 0
    while not fits(current):
        while True:
            if backwards == 0 and forwards == count:
                return None
            if step & 1:
                if backwards == 0:
                    step += 1
                    continue
                backwards -= 1
                current = backwards
            else:
                if forwards == count:
                    step += 1
                    continue
                forwards += 1
                current = forwards
            break
        step += 1
    return current


def _problem(text: Text, hunk: Hunk, pos: int, begin: bool, end: bool) -> str:
    """Why the hunk has no place, in the words of git's rules."""
    elsewhere = _place(text, hunk, pos, False, False)
    if elsewhere is not None and _context(hunk) == (0, 0):
        return (f"the hunk has no context lines (a -U0 diff): git apply places such a hunk only at the start or "
                f"end of the file, and its lines are at line {elsewhere + 1}; make the patch with context "
                "(git diff's default -U3)")
    if elsewhere is not None and begin:
        return (f"the hunk starts at line {hunk.old_start}, so (as git apply requires) it must match at the start "
                f"of the file; its lines are at line {elsewhere + 1} instead")
    if elsewhere is not None and end:
        return (f"the hunk has no lines after its change, so (as git apply requires) it must match at the end of "
                f"the file; its lines are at line {elsewhere + 1} instead")
    if hunk.old_lines and any(text.lines[i: i + len(hunk.old_lines)] == hunk.old_lines
                              for i in range(len(text.lines))):
        want = "ends in a newline" if hunk.old_eof_newline else "does not end in a newline"
        return f"the patch expects that the file's last line {want}; the source's does not agree"
    return "the source differs from the hunk's context"


def _nearest_partial(lines: list[str], wanted: list[str], expected: int) -> int:
    """Where the source looks most like the hunk's old side, to show what it has instead."""
    window = max(50, 4 * len(wanted))
    best_at, best_score = max(0, min(expected, len(lines) - 1)), -1
    for at in range(max(0, expected - window), min(len(lines), expected + window) + 1):
        score = sum(1 for k, line in enumerate(wanted) if at + k < len(lines) and lines[at + k] == line)
        if score > best_score or (score == best_score and abs(at - expected) < abs(best_at - expected)):
            best_at, best_score = at, score
    return best_at


def _create(path: str, text: Text | None, file_patch: FilePatch) -> tuple[Text | None, list[HunkResult]]:
    header = file_patch.hunks[0].header if file_patch.hunks else "(empty file)"
    result = HunkResult(path, 1, header)
    if text is not None:
        result.problem = "the file already exists"
        result.found = text.lines[:10]
        return None, [result]
    result.offset = 0
    if not file_patch.hunks:
        return Text([], True), [result]
    hunk = file_patch.hunks[0]
    return Text(list(hunk.new_lines), hunk.new_eof_newline), [result]


def apply_file(path: str, text: Text | None, file_patch: FilePatch) -> tuple[Text | None, list[HunkResult]]:
    """(new Text, or None for a deletion; [HunkResult]); stops at the first hunk that fails."""
    if file_patch.old_path is None:
        return _create(path, text, file_patch)
    header = file_patch.hunks[0].header if file_patch.hunks else "(empty file)"
    if text is None:
        return None, [HunkResult(path, 1, header, problem="the file does not exist")]
    if not file_patch.hunks and file_patch.new_path is not None:  # a mode change alone
        return Text(list(text.lines), text.eof_newline), [HunkResult(path, 1, "(mode change)", offset=0)]
    if not file_patch.hunks:  # deletes an empty file
        result = HunkResult(path, 1, header, offset=0)
        if text.lines:
            result.offset, result.problem = None, "the patch deletes an empty file, but the file has content"
        return None, [result]
    results = []
    current = Text(list(text.lines), text.eof_newline)
    growth = 0  # lines added by earlier hunks
    for index, hunk in enumerate(file_patch.hunks, 1):
        old, new = hunk.old_lines, hunk.new_lines
        stated = (hunk.old_start - 1 if hunk.old_len else hunk.old_start) + growth
        pos = hunk.new_start - 1 if hunk.new_start else 0  # git starts at the hunk's new-side line
        begin, end = _anchors(hunk)
        at = _place(current, hunk, pos, begin, end)
        result = HunkResult(path, index, hunk.header)
        leading, trailing = _context(hunk)
        if at is not None and not leading and not trailing and at != pos:
            result.problem = (f"the hunk has no context lines, and its stated line ({pos + 1}) is not where it "
                              f"would go (git apply would put it at line {at + 1}); make the patch with context "
                              "(git diff's default -U3)")
            at = None
        if at is None:
            near = _nearest_partial(current.lines, old, pos)
            result.expected, result.found, result.found_at = old, current.lines[near: near + max(len(old), 1)], near + 1
            result.problem = result.problem or _problem(current, hunk, pos, begin, end)
            results.append(result)
            return None, results
        result.offset = at - stated
        results.append(result)
        touches_end = at + len(old) == len(current.lines)
        current.lines[at: at + len(old)] = new
        if touches_end:
            current.eof_newline = hunk.new_eof_newline
        growth += len(new) - len(old)
    lines = current.lines
    if file_patch.new_path is None:
        if lines:
            results[-1].offset = None
            results[-1].problem = "the file is not empty after removing the patch's lines"
        return None, results
    return current, results


def apply_binary(path: str, data: bytes | None, file_patch: FilePatch) -> tuple[bytes | None, list[HunkResult]]:
    """A git binary patch, as git applies one: the file before must have the blob id the index
    line names (or be absent, for a new file), and the result the new one."""
    change = file_patch.binary
    assert change is not None
    result = HunkResult(path, 1, "(binary)")
    creating = file_patch.old_path is None
    if creating and data is not None:
        result.problem = "the file already exists"
        return None, [result]
    if not creating and data is None:
        result.problem = "the file does not exist"
        return None, [result]
    before = data or b""
    if not creating and blob_id(before) != change.old_id:
        result.problem = (f"the binary patch applies to the file with blob id {change.old_id[:12]}; this one is "
                          f"{blob_id(before)[:12]}")
        return None, [result]
    if file_patch.new_path is None:
        result.offset = 0
        return None, [result]
    try:
        after = change.forward.apply(before)
    except BinaryPatchError as exc:
        result.problem = f"the binary patch does not apply: {exc}"
        return None, [result]
    if blob_id(after) != change.new_id:
        result.problem = f"the binary patch makes blob {blob_id(after)[:12]}, not the {change.new_id[:12]} it names"
        return None, [result]
    result.offset = 0
    return after, [result]
