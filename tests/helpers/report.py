"""The reliability report: tests add what they tried and what came of it; the session prints it."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

FIGURES: dict = defaultdict(lambda: defaultdict(int))


def count(section: str, figure: str, n: int = 1) -> None:
    FIGURES[section][figure] += n


def peak(section: str, figure: str, value) -> None:
    FIGURES[section][figure] = max(FIGURES[section][figure], value)


def render() -> list:
    lines = ["reliability report"]
    for section in sorted(FIGURES):
        figures = ", ".join(f"{k} {v}" for k, v in sorted(FIGURES[section].items()))
        lines.append(f"  {section}: {figures}")
    return lines


def write(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({s: dict(f) for s, f in FIGURES.items()}, indent=2, sort_keys=True) + "\n")
