"""Applying a patch to file contents in memory, strictly: exact context, no fuzz.

A hunk may move (an offset, reported); it may not match approximately. When it does
not match, the result says which hunk, and what the source has where it was expected.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Text:
    """A file as lines without terminators, and whether its last line ends in a newline."""

    lines: list
    eof_newline: bool = True

    @classmethod
    def parse(cls, data: bytes) -> "Text":
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
    expected: list = field(default_factory=list)
    found: list = field(default_factory=list)
    found_at: int | None = None  # 1-based line of `found`
    problem: str = ""

    @property
    def applied(self) -> bool:
        return self.offset is not None


def _matches(lines: list, at: int, wanted: list) -> bool:
    return at >= 0 and lines[at: at + len(wanted)] == wanted


def _closest(lines: list, wanted: list, expected: int, floor: int) -> int | None:
    """The exact match nearest to the expected line, never before `floor`."""
    if not wanted:
        return max(floor, min(expected, len(lines)))
    best = None
    for distance in range(0, max(len(lines), 1) + 1):
        for at in (expected - distance, expected + distance) if distance else (expected,):
            if at >= floor and _matches(lines, at, wanted):
                best = at
                break
        if best is not None:
            return best
        if expected - distance < floor and expected + distance > len(lines):
            return None
    return None


def _nearest_partial(lines: list, wanted: list, expected: int) -> int:
    """Where the source looks most like the hunk's old side, to show what it has instead."""
    window = max(50, 4 * len(wanted))
    best_at, best_score = max(0, min(expected, len(lines) - 1)), -1
    for at in range(max(0, expected - window), min(len(lines), expected + window) + 1):
        score = sum(1 for k, line in enumerate(wanted) if at + k < len(lines) and lines[at + k] == line)
        if score > best_score or (score == best_score and abs(at - expected) < abs(best_at - expected)):
            best_at, best_score = at, score
    return best_at


def apply_file(path: str, text: Text | None, file_patch) -> tuple:
    """(new Text or None for a deletion, [HunkResult]) — stops at the first hunk that fails."""
    results = []
    if file_patch.old_path is None:  # creates the file
        result = HunkResult(path, 1, file_patch.hunks[0].header)
        if text is not None:
            result.problem = "the file already exists"
            result.found = text.lines[:10]
            return None, [result]
        hunk = file_patch.hunks[0]
        result.offset = 0
        return Text(list(hunk.new_lines), hunk.new_eof_newline), [result]
    if text is None:
        return None, [HunkResult(path, 1, file_patch.hunks[0].header, problem="the file does not exist")]
    lines = list(text.lines)
    eof_newline = text.eof_newline
    growth, drift, floor = 0, 0, 0  # lines added by earlier hunks; how far the last hunk moved
    for index, hunk in enumerate(file_patch.hunks, 1):
        old, new = hunk.old_lines, hunk.new_lines
        stated = (hunk.old_start - 1 if hunk.old_len else hunk.old_start) + growth
        expected = stated + drift
        at = _closest(lines, old, expected, floor)
        result = HunkResult(path, index, hunk.header)
        touches_end = at is not None and at + len(old) == len(lines)
        if at is not None and not hunk.old_eof_newline and (not touches_end or eof_newline):
            at = None  # the hunk says the old file ends without a newline right here
        if at is None:
            near = _nearest_partial(lines, old, expected)
            result.expected = old
            result.found = lines[near: near + max(len(old), 1)]
            result.found_at = near + 1
            result.problem = "the source differs from the hunk's context"
            results.append(result)
            return None, results
        result.offset = drift = at - stated
        results.append(result)
        lines[at: at + len(old)] = new
        if at + len(new) == len(lines) and (touches_end or not old):
            eof_newline = hunk.new_eof_newline
        growth += len(new) - len(old)
        floor = at + len(new)
    if file_patch.new_path is None:  # deletes the file
        if lines:
            results[-1].offset = None
            results[-1].problem = "the file is not empty after removing the patch's lines"
            return None, results
        return None, results
    return Text(lines, eof_newline), results
