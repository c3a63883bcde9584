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
                            for p in self.pins)
        return f"python {members}" if self.group is None else f"python group {self.group:02d}: {members}"


def group_of(name: str) -> int:
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % GROUPS


def wheel_sets(pins: tuple[PyPin, ...] | list[PyPin]) -> list[WheelSet]:
    """The layers of a closure, big distributions first (by name), then the groups in order."""
    big = sorted((p for p in pins if (p.size or 0) >= BIG), key=lambda p: (-(p.size or 0), p.name))[:MAX_OWN]
    own = {p.name for p in big}
    groups: dict[int, list[PyPin]] = {}
    for pin in pins:
        if pin.name not in own:
            groups.setdefault(group_of(pin.name), []).append(pin)
    out = [WheelSet(None, (p,)) for p in sorted(big, key=lambda p: p.name)]
    out += [WheelSet(g, tuple(sorted(groups[g], key=lambda p: p.name))) for g in sorted(groups)]
    return out
