"""Escaping for every value that reaches a Dockerfile or a shell line.

Templates never interpolate a spec value raw: they go through one of these filters,
so a value cannot end an instruction, start a new one or run a command.
"""
from __future__ import annotations

import json
import shlex


class UnsafeValue(ValueError):
    pass


def _refuse_breaks(value: str) -> str:
    if any(ch in value for ch in "\n\r\x00"):
        raise UnsafeValue(f"value {value[:40]!r} contains a line break or NUL byte")
    return value


def dockerfile_string(value: str) -> str:
    """A double-quoted Dockerfile word (ENV, LABEL): no variable expansion, no breaks."""
    _refuse_breaks(value)
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def exec_form(args: list[str] | tuple[str, ...]) -> str:
    """A JSON array for exec-form RUN/ENTRYPOINT/CMD: no shell ever parses it."""
    for arg in args:
        _refuse_breaks(arg)
    return json.dumps(list(args))


def shell_word(value: str) -> str:
    """A single shell word for shell-form RUN lines."""
    return shlex.quote(_refuse_breaks(value))


def shell_line(command: str) -> str:
    """A user-written shell command: one line, and it may not continue into the next instruction."""
    _refuse_breaks(command)
    if command.rstrip().endswith("\\"):
        raise UnsafeValue("a command may not end in a backslash (it would swallow the next instruction)")
    return command


FILTERS: dict[str, object] = {"dq": dockerfile_string, "json": exec_form, "sh": shell_word, "shline": shell_line}
