"""What users see during long work: transfers with bytes, rate and ETA; builds with a live line.

On a terminal, one line per task is rewritten in place. Elsewhere (CI logs, pipes) a plain
line is printed every `ENGINEBUILD_PROGRESS_EVERY` seconds (10) and when the task ends. With `--quiet`,
nothing. Everything goes to stderr; stdout stays for results.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from enginebuild.settings import settings


def plain_every() -> float:
    return settings().progress_every_s
_STEP = re.compile(r"\[\s*(\d+)\s*/\s*(\d+)\s*\]")


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def human_seconds(s: float) -> str:
    s = max(0, int(round(s)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


@dataclass
class Output:
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    quiet: bool = False
    live: bool | None = None  # None: a terminal that is not CI
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        if self.live is None:
            self.live = self.stream.isatty() and not settings().plain_progress
        self._lock = threading.Lock()
        self._open_line = False

    def say(self, text: str) -> None:
        if self.quiet:
            return
        with self._lock:
            if self._open_line:
                self.stream.write("\n")
                self._open_line = False
            self.stream.write(text + "\n")
            self.stream.flush()

    def status(self, text: str) -> None:
        """A line that the next status line replaces (terminal), or a plain line."""
        if self.quiet:
            return
        with self._lock:
            if self.live:
                width = 150
                self.stream.write("\r\x1b[2K" + text[:width])
                self._open_line = True
            else:
                self.stream.write(text + "\n")
            self.stream.flush()

    def done(self, text: str) -> None:
        if self.quiet:
            return
        with self._lock:
            if self.live and self._open_line:
                self.stream.write("\r\x1b[2K")
                self._open_line = False
            self.stream.write(text + "\n")
            self.stream.flush()


class Transfer:
    """A download or upload of a known (or unknown) number of bytes."""

    def __init__(self, out: Output, verb: str, what: str, total: int | None):
        self.out, self.verb, self.what, self.total = out, verb, what, total
        self.done_bytes = 0
        self.start = self.last = out.clock()

    def line(self) -> str:
        elapsed = max(1e-6, self.out.clock() - self.start)
        rate = self.done_bytes / elapsed
        text = f"  {self.verb} {self.what}: {human_bytes(self.done_bytes)}"
        if self.total:
            text += f" of {human_bytes(self.total)} ({100 * self.done_bytes / self.total:.0f}%)"
        text += f", {human_bytes(rate)}/s"
        if self.total and rate > 0 and self.done_bytes < self.total:
            text += f", ETA {human_seconds((self.total - self.done_bytes) / rate)}"
        return text

    def advance(self, n: int) -> None:
        self.done_bytes += n
        now = self.out.clock()
        every = 0.2 if self.out.live else plain_every()
        if now - self.last >= every:
            self.last = now
            self.out.status(self.line())

    def finish(self) -> None:
        elapsed = self.out.clock() - self.start
        self.out.done(f"  {self.verb} {self.what}: {human_bytes(self.done_bytes)} in {elapsed:.1f}s")


def meaningful(line: str) -> bool:
    """A builder line worth showing as the latest state (not blank, not a bare timing line)."""
    text = line.strip()
    return bool(text) and not re.fullmatch(r"#\d+ (?:DONE|CACHED|\.\.\.).*|#\d+ \d+\.\d+ *", text)


class BuildLine:
    """The live line of one running build: latest meaningful output, [n/N] progress, elapsed, ETA."""

    def __init__(self, out: Output, label: str, expected_s: float | None):
        self.out, self.label, self.expected_s = out, label, expected_s
        self.start = self.last = out.clock()
        self.latest = ""
        self.step: tuple[int, int] | None = None

    def feed(self, line: str) -> None:
        text = re.sub(r"^#\d+ \d+\.\d+ ", "", line.strip())
        # the build's own [n/N] (ninja, make); BuildKit's "#7 [2/3] RUN" counts instructions, not work
        match = None if re.match(r"#\d+ \[", text) else _STEP.search(text)
        if match and int(match.group(2)) > 0:
            self.step = (int(match.group(1)), int(match.group(2)))
        if meaningful(line):
            self.latest = text
        now = self.out.clock()
        if now - self.last >= (0.25 if self.out.live else plain_every()):
            self.last = now
            self.out.status(self.line())

    def eta(self) -> float | None:
        """Seconds left, or None when nothing says (a build past its last time is not "0 s left")."""
        elapsed = self.out.clock() - self.start
        if self.step and self.step[0] > 0 and elapsed > 5:
            done, total = self.step
            return elapsed * (total - done) / done
        if self.expected_s and elapsed < self.expected_s:
            return self.expected_s - elapsed
        return None

    def line(self) -> str:
        elapsed = self.out.clock() - self.start
        text = f"  {self.label} {human_seconds(elapsed)}"
        if self.step:
            text += f" [{self.step[0]}/{self.step[1]}]"
        eta = self.eta()
        if eta is not None:
            basis = "from progress" if self.step and elapsed > 5 else "from the last build"
            text += f", ETA {human_seconds(eta)} ({basis})"
        elif self.expected_s:
            text += f", ETA unknown (past the last build's {human_seconds(self.expected_s)})"
        else:
            text += ", ETA unknown"
        if self.latest:
            text += f"  | {self.latest[:90]}"
        return text

    def tick(self) -> None:
        """Called by a timer: keeps a quiet build's line (and CI log) alive."""
        now = self.out.clock()
        if now - self.last >= (1.0 if self.out.live else plain_every()):
            self.last = now
            self.out.status(self.line())


_OUTPUT: Output | None = None


def output() -> Output:
    global _OUTPUT
    if _OUTPUT is None:
        _OUTPUT = Output()
    return _OUTPUT


def configure(*, quiet: bool = False, stream: TextIO | None = None, live: bool | None = None) -> Output:
    global _OUTPUT
    _OUTPUT = Output(stream=stream or sys.stderr, quiet=quiet, live=live)
    return _OUTPUT
