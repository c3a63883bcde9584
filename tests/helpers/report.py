"""The reliability report: tests add what they tried and what came of it; the session prints it."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

FIGURES: dict = defaultdict(lambda: defaultdict(int))
TIMES: dict = defaultdict(float)  # (worker, test file) -> seconds its tests' setup, call and teardown took
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


def took(worker: str, test_file: str, seconds: float) -> None:
    TIMES[(worker, test_file)] += seconds


def time_lines() -> list:
    """Where a run's time went: per worker (a parallel run's balance) and the slowest files."""
    workers: dict = defaultdict(float)
    for (worker, _), seconds in TIMES.items():
        workers[worker] += seconds
    slowest = sorted(TIMES.items(), key=lambda kv: -kv[1])[:12]
    return ["time per worker: " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(workers.items())),
            "slowest files: " + ", ".join(f"{f.removeprefix('tests/')} ({w}) {s:.0f} s" for (w, f), s in slowest)]


def write_times(path: Path, selection: str) -> None:
    """Every file's time, under the run's selection (`-m fast`, `-m "not fast"`, ...) in `path`."""
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known[selection] = [{"file": f, "worker": w, "seconds": round(s, 1)}
                        for (w, f), s in sorted(TIMES.items(), key=lambda kv: -kv[1])]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(known, indent=1) + "\n")
