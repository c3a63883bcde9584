"""What users see during long work: transfers with bytes, rate and ETA; builds with a live line.

On a terminal, each running task (a build, a transfer) has its own labelled line at the bottom,
rewritten in place; two components building at once are two lines. Elsewhere (CI logs, pipes) a plain
line is printed every `ENGINEBUILD_PROGRESS_EVERY` seconds (10) and when the task ends. With `--quiet`,
nothing. Everything goes to stderr; stdout stays for results.
"""

from __future__ import annotations

import re
import shutil
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
    """On a terminal, a board at the bottom: one line per running task (each build, each transfer),
    rewritten in place, with what is said printed above it. Elsewhere, plain lines."""

    stream: TextIO = field(default_factory=lambda: sys.stderr)
    quiet: bool = False
    live: bool | None = None  # None: a terminal that is not CI
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        if self.live is None:
            self.live = self.stream.isatty() and not settings().plain_progress
        self._lock = threading.Lock()
        self._board: dict[object, str] = {}  # task -> its line, in the order the tasks began
        self._drawn = 0

    def say(self, text: str) -> None:
        self._write(text, None, None)

    def status(self, text: str, task: object = None) -> None:
        """The line of `task`, replacing its previous one (terminal), or a plain line."""
        self._write(None, task, text)

    def done(self, text: str, task: object = None) -> None:
        """A line that stays; `task`'s live line (if any) goes."""
        self._write(text, task, None, release=True)

    def release(self, task: object) -> None:
        """`task` ended: its live line goes."""
        self._write(None, task, None, release=True)

    def _write(self, text: str | None, task: object, line: str | None, release: bool = False) -> None:
        if self.quiet:
            return
        with self._lock:
            if not self.live:
                if text is not None or line is not None:
                    self.stream.write(f"{text if text is not None else line}\n")
                    self.stream.flush()
                return
            if line is not None:
                self._board[task] = line
            elif release:
                self._board.pop(task, None)
            self.stream.write("\x1b[1A\x1b[2K" * self._drawn)  # the board goes, the cursor to its top
            if text is not None:
                self.stream.write(text + "\n")
            width = max(20, shutil.get_terminal_size((151, 24)).columns - 1)  # a wrapped line would break the count
            for shown in self._board.values():
                self.stream.write(shown[:width] + "\n")
            self._drawn = len(self._board)
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
            self.out.status(self.line(), self)

    def finish(self) -> None:
        elapsed = self.out.clock() - self.start
        self.out.done(f"  {self.verb} {self.what}: {human_bytes(self.done_bytes)} in {elapsed:.1f}s", self)


def meaningful(line: str) -> bool:
    """A builder line worth showing as the latest state (not blank, not a bare timing line)."""
    text = line.strip()
    # BuildKit's bookkeeping (DONE, CACHED, timings, layer digests being extracted) is not a state
    return bool(text) and not re.fullmatch(r"#\d+ (?:DONE|CACHED|\.\.\.|sha256:[0-9a-f]+).*|#\d+ \d+\.\d+ *", text)


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
            self.out.status(self.line(), self)

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
            self.out.status(self.line(), self)

    def close(self) -> None:
        """The build ended: its live line goes (what it made is said by the caller)."""
        self.out.release(self)


class Work:
    """Long work that prints nothing of its own (layers being written, an image being loaded),
    kept visible by a timer: on a terminal a live line; elsewhere a plain line every
    ENGINEBUILD_PROGRESS_EVERY seconds (none for work that ends sooner). `detail` says where it is."""

    def __init__(self, out: Output, label: str):
        self.out, self.label, self.detail = out, label, ""
        self.start = self.last = out.clock()
        self._stop = threading.Event()
        self._timer = threading.Thread(target=self._run, daemon=True)

    def line(self) -> str:
        text = f"  {self.label} {human_seconds(self.out.clock() - self.start)}"
        return f"{text}  | {self.detail}" if self.detail else text

    def _run(self) -> None:
        while not self._stop.wait(0.25 if self.out.live else min(1.0, plain_every())):
            now = self.out.clock()
            if now - self.last >= (0.25 if self.out.live else plain_every()):
                self.last = now
                self.out.status(self.line(), self)

    def __enter__(self) -> Work:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._timer.join()
        self.out.release(self)


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
