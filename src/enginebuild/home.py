"""Where enginebuild keeps its machine-local state: the content-addressed store, git mirrors, build records."""
from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    explicit = os.environ.get("ENGINEBUILD_HOME")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "enginebuild"
