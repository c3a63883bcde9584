"""A component's declared inputs as globs over the paths of its source tree (the standard
library only: the spec reader and the planner match with it without loading a tree)."""

from __future__ import annotations

import re
from collections.abc import Callable


def declared_matcher(globs: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a path of a source tree is one of its declared inputs: `*` and `?` within one path
    part, `**` across parts, a folder (`csrc/` or `csrc`) with everything under it."""

    parts = []
    for glob in globs:
        text = glob.rstrip("/")
        tokens = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
        pattern = "".join(tokens.get(tok, re.escape(tok)) for tok in re.split(r"(\*\*/|\*\*|\*|\?)", text) if tok)
        parts.append(f"{pattern}(?:/.*)?")
    regex = re.compile("|".join(f"(?:{p})" for p in parts)) if parts else None
    return lambda path: regex is None or regex.fullmatch(path.strip("/")) is not None
