"""The reliability report: tests add what they tried and what came of it; the session prints it."""
from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

FIGURES: dict = defaultdict(lambda: defaultdict(int))
TIMES: dict = defaultdict(float)  # (worker, test file) -> seconds its tests' setup, call and teardown took
PEAKS: set = set()  # (section, figure) kept as a maximum, not a sum
CALLS: list = []  # (seconds, test, what): the slow child processes a test ran (`enginebuild ...`, `docker ...`)
SLOW_CALL = 15.0  # seconds: a child process that took longer is listed among the run's slow calls


def count(section: str, figure: str, n: int = 1) -> None:
    FIGURES[section][figure] += n


def peak(section: str, figure: str, value) -> None:
    PEAKS.add((section, figure))
    FIGURES[section][figure] = max(FIGURES[section][figure], value)


def export() -> dict:
    """What a parallel test worker found, for the controller to merge."""
    return {"figures": {s: dict(f) for s, f in FIGURES.items()}, "peaks": sorted(PEAKS), "calls": CALLS}


def merge(found: dict) -> None:
    CALLS.extend(tuple(call) for call in found.get("calls", []))
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


def called(what: list, seconds: float) -> None:
    """A child process a test ran, kept when it was slow: where a long test's time went."""
    if seconds >= SLOW_CALL:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
        CALLS.append((round(seconds, 1), test, " ".join(map(str, what))[:160]))


def took(worker: str, test_file: str, seconds: float) -> None:
    TIMES[(worker, test_file)] += seconds


def time_lines() -> list:
    """Where a run's time went: per worker (a parallel run's balance) and the slowest files."""
    workers: dict = defaultdict(float)
    for (worker, _), seconds in TIMES.items():
        workers[worker] += seconds
    slowest = sorted(TIMES.items(), key=lambda kv: -kv[1])[:12]
    return ["time per worker: " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(workers.items())),
            "slowest files: " + ", ".join(f"{f.removeprefix('tests/')} ({w}) {s:.0f} s" for (w, f), s in slowest),
            f"child processes over {SLOW_CALL:.0f} s: {len(CALLS)}, {sum(c[0] for c in CALLS):.0f} s in all",
            *(f"  {s:7.1f} s  {test.removeprefix('tests/')}: {what}" for s, test, what in sorted(CALLS, reverse=True)[:40])]


def write_times(path: Path, selection: str) -> None:
    """Every file's time, under the run's selection (`-m fast`, `-m "not fast"`, ...) in `path`."""
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known[selection] = [{"file": f, "worker": w, "seconds": round(s, 1)}
                        for (w, f), s in sorted(TIMES.items(), key=lambda kv: -kv[1])]
    known[f"{selection}: slow calls"] = [{"seconds": s, "test": t, "call": c} for s, t, c in sorted(CALLS, reverse=True)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(known, indent=1) + "\n")
