"""The errors a user can meet, each with its exit code.

Exit codes: 0 ok, 1 a failed build or check, 2 bad input or usage, 130 interrupted
(Ctrl-C), 143 terminated (SIGTERM).
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


@dataclass(frozen=True)
class Where:
    """A place in a user's file: `images/x/image.yaml:12`."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


_COMMAND = ["python BUILD.py"]


def command() -> str:
    """How the user runs enginebuild, for hints: `python BUILD.py`, or `enginebuild` when the
    pip-installed command started this process."""
    return _COMMAND[0]


def set_command(name: str) -> None:
    _COMMAND[0] = name


class EngineBuildError(Exception):
    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        text = f"error: {self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class UserError(EngineBuildError):
    """Bad input or usage: a spec, a lockfile, a command line. Exit 2."""

    exit_code = EXIT_BAD_INPUT


def printable(text: str) -> str:
    """`text` with control characters escaped (\\n, \\x1b): a key from a spec never breaks a line
    of an error or moves the terminal's cursor."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown_line(text: str, limit: int = 300) -> str:
    """A line another party wrote (a container's output, a node's answer) as a message shows it:
    control characters escaped, at most `limit` characters (the rest said as a count), and a
    workflow command (`::error`, `::add-mask`) at its start defused."""
    flat = printable(text.strip())
    if flat.startswith("::"):
        flat = "> " + flat  # a CI runner reads `::` at a line's start as a command to it, blanks aside
    if len(flat) > limit:
        flat = f"{flat[:limit]}... ({len(flat) - limit} more characters)"
    return flat


class SpecError(UserError):
    """An error in a spec file, located at file:line and a key path."""

    def __init__(self, where: Where | None, key: str, message: str, *, hint: str | None = None):
        prefix = f"{where}: " if where else ""
        keypart = f"{printable(key)}: " if key else ""
        super().__init__(f"{prefix}{keypart}{message}", hint=hint)
        self.where = where
        self.key = key


class LockError(UserError):
    """A lockfile is missing, stale or unreadable where a pinned input is required."""


class LockWouldChange(EngineBuildError):
    """--locked/--frozen: the lock does not pin what the spec asks, and may not be changed."""


class FetchError(EngineBuildError):
    """An input could not be fetched or did not match its pinned sha256."""


class ResolveError(EngineBuildError):
    """A floating reference could not be resolved to a pin."""


class RegistryError(EngineBuildError):
    """A registry refused or failed a request."""


class RegistryUnreachable(RegistryError):
    """The registry could not be reached, or kept failing, after bounded retries; `kind` as
    io.http.HttpFailure's (dns, refused, connection, status)."""

    def __init__(self, message: str, *, kind: str, hint: str | None = None, answer: str | None = None):
        super().__init__(message, hint=hint)
        self.kind = kind
        self.answer = answer  # the registry's last answer, when it gave one ("HTTP 503: ...")


class BuildFailed(EngineBuildError):
    """The builder failed a component or a step."""


class BuilderLost(BuildFailed):
    """The engine a build ran on stopped answering: the build may be run again elsewhere."""


class SecretUnchecked(EngineBuildError):
    """A layer was never searched for a secret the spec declares, and its value is not here."""


class SecretLeak(BuildFailed):
    """A build left a secret (or a credential) in a layer; nothing was tagged or recorded."""


class ToolMissing(UserError):
    """A required external program (docker, git, BuildKit, uv) is not available."""
