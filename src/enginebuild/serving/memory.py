"""The unified-memory preflight: on a GPU that shares the system's memory (GB10: DGX Spark), what
vLLM's start-up check will count as free, before minutes of loading are spent on a start it fails.

vLLM asks CUDA for free memory and refuses to start when it is less than GPU_MEMORY_UTILIZATION of
the total. On unified memory CUDA's free figure follows the kernel's MemFree, in which the page
cache counts as used, less what the GPU's driver keeps: writing 60 GiB of files on a GB10 moved it
from 103.25 to 41.52 GiB while MemAvailable stayed at 115.65 GiB (12.40 GiB kept: RESERVE); with
the page cache dropped, two Sparks' free figure capped at 101.3-102.2 of 121.69 GiB, so 0.87
(105.87 GiB) never passed and they run at 0.82-0.83. A node that just read a model's weights may
fail a utilization it passes after `drop_caches`. Pure: the numbers in, the verdict out."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30
DEFAULT_UTILIZATION = 0.9  # vLLM's own default
MARGIN = 0.01  # what the utilization offered stays under the ratio the check compares with
RESERVE = int(12.40 * GIB)  # GB10: MemAvailable with no page cache, less the free figure CUDA gave then


@dataclass(frozen=True)
class Memory:
    """A node's /proc/meminfo, in bytes."""

    total: int
    free: int
    available: int


@dataclass(frozen=True)
class Verdict:
    passes: bool  # whether vLLM's check passes with the utilization asked
    utilization: float  # the highest GPU_MEMORY_UTILIZATION the check passes now (two decimals)
    after_drop: float  # the same once the page cache is dropped (MemAvailable counted free)
    line: str  # the numbers, in one line


def parse_meminfo(text: str) -> Memory:
    """MemTotal, MemFree and MemAvailable of /proc/meminfo's text (kB), or ValueError naming the missing one."""
    found: dict[str, int] = {}
    for line in text.splitlines()[:200]:
        name, _, rest = line.partition(":")
        parts = rest.split()
        if name in ("MemTotal", "MemFree", "MemAvailable") and parts and parts[0].isdigit():
            found[name] = int(parts[0]) * 1024
    missing = [n for n in ("MemTotal", "MemFree", "MemAvailable") if n not in found]
    if missing:
        raise ValueError(f"/proc/meminfo has no {missing[0]}")
    return Memory(found["MemTotal"], found["MemFree"], found["MemAvailable"])


def _passing(free: int, total: int) -> float:
    return max(0.0, int((free / total - MARGIN) * 100) / 100) if total else 0.0


def check(memory: Memory, asked: float, reserve: int = RESERVE) -> Verdict:
    """Whether vLLM's start-up check passes `asked` on unified memory, and what would."""
    counted = max(0, memory.free - reserve)
    now, dropped = _passing(counted, memory.total), _passing(max(0, memory.available - reserve), memory.total)
    wanted = asked * memory.total
    cache = max(0, memory.available - memory.free)
    line = (f"vLLM's start-up check will count about {counted / GIB:.2f} GiB free of {memory.total / GIB:.2f} GiB "
            f"(MemFree {memory.free / GIB:.2f} GiB, the page cache's {cache / GIB:.2f} GiB counted as used, less "
            f"{reserve / GIB:.2f} GiB the driver keeps); GPU_MEMORY_UTILIZATION={asked:g} asks {wanted / GIB:.2f} GiB: ")
    if counted >= wanted:
        return Verdict(True, now, dropped, line + "it passes")
    return Verdict(False, now, dropped, line + f"it fails; {now:.2f} passes now, {dropped:.2f} once the page cache "
                                             f"is dropped (MemAvailable {memory.available / GIB:.2f} GiB)")
