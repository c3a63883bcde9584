"""The answer to `BUILD.py image NAME...` when nothing changed, before anything else loads
(and, when only files the image copies changed, fastedit.py's).

A no-op is the command users run most, so it gets its own path: the decision every answer of
`image` goes through (state/decision.py: the plan memo, state/memo.py, and one question to the
engine per image and platform, oci/probe.py, over its socket), with the standard library only.
Options that do not change the image are answered here too:
`-q`/`--quiet` and `--progress` (how it is said), `--locked` and `--frozen` (a memo that matches
was stored by a build whose spec and lock are the files as they are now, the lock unchanged by
it: current). Whatever is in doubt (another option, a memo that does not match, an image missing, an engine
not on a unix socket) returns None and the full command runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from enginebuild.oci.probe import image_id
from enginebuild.settings import settings
from enginebuild.state.decision import FilesEdited, UpToDate, decide
from enginebuild.state.memo import PlanMemo, RunOptions

if TYPE_CHECKING:
    from enginebuild.oci.engine import EngineApi

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-._:")
_PROGRESS = ("auto", "plain", "tty", "quiet")


def _saying(argv: list[str]) -> tuple[list[str], list[str]] | None:
    """(argv without the options that only change how things are said, those options), or None
    for a --progress value the full command must refuse."""
    rest: list[str] = []
    said: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg in ("-q", "--quiet"):
            said.append(arg)
        elif arg == "--progress" or arg.startswith("--progress="):
            value = arg.partition("=")[2] if "=" in arg else next(args, "")
            if value not in _PROGRESS:
                return None
            said.append(f"--progress={value}")
        else:
            rest.append(arg)
    return rest, said


def _is_name(text: str) -> bool:
    return 0 < len(text) <= 127 and text[0] not in "-.:" and set(text) <= _NAME_CHARS


# what `image` may be given and still be answered here: none of these changes the image built
_ANSWERABLE = frozenset({"images", "platform", "push", "to", "push_tag", "locked", "frozen"})


def _image_args(argv: list[str]) -> tuple[list[str], list[str], list[str]] | None:
    """(names, platforms, push options) of `image`'s arguments, parsed by its own parser
    (commands/arguments.py: one grammar for the command and this path), or None where an option
    beyond the answerable ones is given (`-t` among them: the full command tags), or the full
    command must say what is wrong."""
    import argparse

    from enginebuild.commands.arguments import image_parser

    parser = image_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        defaults = vars(parser.parse_args([]))
    except (argparse.ArgumentError, SystemExit):
        return None
    if unknown or any(getattr(args, key) != value for key, value in defaults.items() if key not in _ANSWERABLE):
        return None
    names, platforms = list(args.images), list(args.platform)
    if not all(_is_name(name) for name in names) or not all(
            value.count("/") == 1 and all(_is_name(part) for part in value.split("/")) for value in platforms):
        return None
    if not args.push:
        return (names, platforms, []) if not args.to and not args.push_tag else None
    if not args.to or args.to.startswith("-") or len(names) != 1 or any(t.startswith("-") for t in args.push_tag):
        return None  # the full command explains what is missing
    return names, platforms, ["--push", "--to", args.to, *(a for t in args.push_tag for a in ("--tag", t))]


def _holds(engine: EngineApi | None) -> Callable[[str, str], bool]:
    if engine is None:
        return lambda tag, ident: image_id(tag) == ident
    from enginebuild.oci.engine import holds

    return holds(engine)


def answer(argv: list[str], root: str, engine: EngineApi | None = None) -> list[str] | None:
    """None: run the full command; []: answered; else the command still to run (`push`). `engine`:
    the one images are asked of and loaded into (None: this machine's, over its unix socket)."""
    saying = _saying(argv)
    if saying is None:
        return None
    argv, said = saying
    if len(argv) < 2 or argv[0] != "image":
        return None
    parsed = _image_args(argv[1:])
    if parsed is None or not parsed[0]:
        return None
    import os

    names, platforms, push = parsed
    options = RunOptions(platforms=tuple(platforms))
    memo = PlanMemo(settings().home)
    lines = []
    for name in dict.fromkeys(names):
        start = time.monotonic()
        key = options.key(os.path.realpath(root), name)
        decision = decide(memo, key, _holds(engine))
        if isinstance(decision, FilesEdited):
            from enginebuild.fastedit import answer as edited

            line = edited(memo, key, name, settings().home, decision, engine)
            if line is None:
                return None
            lines.append(line)
            continue
        if not isinstance(decision, UpToDate):
            return None  # the full path builds, and says why (the same decision)
        record = decision.doc
        which = ", ".join(platforms) + (" is" if len(platforms) == 1 else " are") if platforms else "every platform is"
        lines.append(f"{name}: nothing to build, {which} up to date "
                     f"({(time.monotonic() - start) * 1000:.0f} ms) -> {record.summary}")
    print("\n".join(lines), flush=True)
    if not push:
        return []
    return said + ["push", names[0]] + [a for p in platforms for a in ("--platform", p)] + \
        [a for a in push if a != "--push"]
