"""Which Python distributions share a layer.

A closure of 150+ distributions (vLLM's) cannot be one layer per distribution: Docker's
overlay2 refuses an image deeper than 125 layers. Big distributions (torch, NVIDIA's CUDA
libraries, vllm) get a layer each, so bumping one moves only its bytes; the small ones go to
a fixed number of groups chosen by a hash of the distribution's name, so a group's members
depend only on which names the closure holds: bumping (or adding) one small distribution
rewrites the one layer of its group and no other.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from enginebuild.lock.pins import PyPin

BIG = 32 * 2**20      # a wheel at least this big (compressed) gets a layer of its own
MAX_OWN = 32          # at most this many do (the biggest); the rest join the groups
GROUPS = 16           # small distributions are spread over at most this many layers
MAX_LAYERS = MAX_OWN + GROUPS


@dataclass(frozen=True)
class WheelSet:
    """The distributions of one layer: one big one, or one group of small ones."""

    group: int | None  # None: a big distribution alone
    pins: tuple[PyPin, ...]

    @property
    def name(self) -> str:
        members = ", ".join(f"{p.name} {p.version}" + (f" (replaces the base's {p.replaces})" if p.replaces else "")
                            for p in sorted(self.pins, key=lambda p: p.name))
        return f"python {members}" if self.group is None else f"python group {self.group:02d}: {members}"


def group_of(name: str) -> int:
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % GROUPS


def pip_order(pins: tuple[PyPin, ...] | list[PyPin]) -> tuple[PyPin, ...]:
    """Pins in the order pip installs a pinned closure (`pip install --no-deps --require-hashes
    -r`): it sorts by depth in the dependency graph, then by name, and installs the greatest
    first; without dependencies every depth is the same, so by name, descending. Of two that
    write the same path, the first by name is installed last: its file is what stays."""
    return tuple(sorted(pins, key=lambda p: p.name, reverse=True))


def units(pins: tuple[PyPin, ...] | list[PyPin]) -> list[tuple[PyPin, ...]]:
    """The closure in units that must share a layer: a distribution alone, or those that install
    the same paths (the lock's `shares`, followed transitively), each unit in pip's order."""
    by_name = {p.name: p for p in pins}
    seen: set[str] = set()
    out = []
    for pin in sorted(pins, key=lambda p: p.name):
        if pin.name in seen:
            continue
        unit, todo = set(), [pin.name]
        while todo:
            name = todo.pop()
            if name in unit or name not in by_name:
                continue
            unit.add(name)
            todo += by_name[name].shares
        seen |= unit
        out.append(pip_order([by_name[n] for n in unit]))
    return out


def _first(unit: tuple[PyPin, ...]) -> str:
    return min(p.name for p in unit)


def wheel_sets(pins: tuple[PyPin, ...] | list[PyPin]) -> list[WheelSet]:
    """The layers of a closure, big units first (by name), then the groups in order. A unit is a
    distribution, or the distributions that install the same paths: in one layer, installed in
    pip's order, each such path is written once, from the one pip installs last."""
    def size(unit: tuple[PyPin, ...]) -> int:
        return sum(p.size or 0 for p in unit)

    all_units = units(pins)
    big = sorted((u for u in all_units if size(u) >= BIG), key=lambda u: (-size(u), _first(u)))[:MAX_OWN]
    own = {_first(u) for u in big}
    groups: dict[int, list[PyPin]] = {}
    for unit in all_units:
        if _first(unit) not in own:
            groups.setdefault(group_of(_first(unit)), []).extend(unit)
    out = [WheelSet(None, u) for u in sorted(big, key=_first)]
    out += [WheelSet(g, pip_order(groups[g])) for g in sorted(groups)]
    return out
