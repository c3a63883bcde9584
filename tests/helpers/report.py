"""The reliability report: tests add what they tried and what came of it; the session prints it."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

FIGURES: dict = defaultdict(lambda: defaultdict(int))
PEAKS: set = set()  # (section, figure) kept as a maximum, not a sum


def count(section: str, figure: str, n: int = 1) -> None:
    FIGURES[section][figure] += n


def peak(section: str, figure: str, value) -> None:
    PEAKS.add((section, figure))
    FIGURES[section][figure] = max(FIGURES[section][figure], value)


def export() -> dict:
    """What a parallel test worker found, for the controller to merge."""
    return {"figures": {s: dict(f) for s, f in FIGURES.items()}, "peaks": sorted(PEAKS)}


def merge(found: dict) -> None:
    for section, figures in found.get("figures", {}).items():
        for figure, value in figures.items():
            if [section, figure] in found.get("peaks", []):
                peak(section, figure, value)
            else:
                count(section, figure, value)


def render() -> list:
    lines = ["reliability report"]
    for section in sorted(FIGURES):
        figures = ", ".join(f"{k} {v}" for k, v in sorted(FIGURES[section].items()))
        lines.append(f"  {section}: {figures}")
    return lines


def write(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({s: dict(f) for s, f in FIGURES.items()}, indent=2, sort_keys=True) + "\n")
