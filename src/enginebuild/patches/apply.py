"""Applying a patch to file contents in memory, strictly: exact context, no fuzz.

The same code decides what `patches check` reports and what a build receives (the build
applies stacks on the host and ships the patched tree), so the two cannot differ.

Where a hunk goes, as git apply decides it:
- it is looked for at its stated line, then one line later, one earlier, two later, ...
  (the later of two equally distant matches wins);
- a hunk without trailing context must match at the end of the file, and one without
  leading context that starts at line 1 at its beginning;
- stricter than git: a hunk with no context at all (a `-U0` diff) applies only at exactly
  its stated line, since nothing else could confirm another place;
- a hunk matching the file's last line must agree on whether that line ends in a newline.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from enginebuild.patches.patchfile import FilePatch, Hunk


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


def _matches(lines: list[str], at: int, wanted: list[str]) -> bool:
    return 0 <= at and at + len(wanted) <= len(lines) and lines[at: at + len(wanted)] == wanted


def _find(lines: list[str], wanted: list[str], expected: int, floor: int, hunk: Hunk) -> int | None:
    leading, trailing = _context(hunk)
    if not leading and not trailing:  # -U0: exactly where it says
        return expected if expected >= floor and _matches(lines, expected, wanted) else None
    if not trailing:
        at = len(lines) - len(wanted)
        return at if at >= floor and _matches(lines, at, wanted) else None
    if not leading and hunk.old_start <= 1:
        return 0 if floor == 0 and _matches(lines, 0, wanted) else None
    expected = max(0, min(expected, len(lines)))
    for distance in range(0, len(lines) + 1):
        for at in ((expected,) if distance == 0 else (expected + distance, expected - distance)):
            if at >= floor and _matches(lines, at, wanted):
                return at
        if expected - distance < floor and expected + distance > len(lines):
            break
    return None


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
    if not file_patch.hunks:  # deletes an empty file
        result = HunkResult(path, 1, header, offset=0)
        if text.lines:
            result.offset, result.problem = None, "the patch deletes an empty file, but the file has content"
        return None, [result]
    results = []
    lines, eof_newline = list(text.lines), text.eof_newline
    growth, floor = 0, 0  # lines added by earlier hunks; where the last hunk ended
    for index, hunk in enumerate(file_patch.hunks, 1):
        old, new = hunk.old_lines, hunk.new_lines
        stated = (hunk.old_start - 1 if hunk.old_len else hunk.old_start) + growth
        # git starts looking at the hunk's new-side line; a hunk without context stays where it says
        expected = (hunk.new_start - 1 if hunk.new_start else 0) if any(t == " " for t, _ in hunk.lines) else stated
        at = _find(lines, old, expected, floor, hunk)
        result = HunkResult(path, index, hunk.header)
        touches_end = at is not None and at + len(old) == len(lines) and bool(old)
        if at is not None and touches_end and hunk.old_eof_newline != eof_newline:
            want = "ends in a newline" if hunk.old_eof_newline else "does not end in a newline"
            result.problem = f"the patch expects that the file's last line {want}; the source's does not agree"
            at = None
        elif at is not None and not hunk.old_eof_newline and not touches_end:
            at = None  # the hunk says the old file ends right here, without a newline
        if at is None:
            near = _nearest_partial(lines, old, expected)
            result.expected, result.found, result.found_at = old, lines[near: near + max(len(old), 1)], near + 1
            result.problem = result.problem or "the source differs from the hunk's context"
            results.append(result)
            return None, results
        result.offset = at - stated
        results.append(result)
        lines[at: at + len(old)] = new
        if at + len(new) == len(lines) and (touches_end or not old):
            eof_newline = hunk.new_eof_newline
        growth += len(new) - len(old)
        floor = at + len(new)
    if file_patch.new_path is None:
        if lines:
            results[-1].offset = None
            results[-1].problem = "the file is not empty after removing the patch's lines"
        return None, results
    return Text(lines, eof_newline), results
