"""The unified-memory preflight: what vLLM's start-up check will count as free on a GB10, from
/proc/meminfo, before minutes of loading. Figures recorded from public GB10 reports, and this
machine's own /proc/meminfo; the page cache dropped for real by the privileged container `serve
--drop-caches` runs."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from enginebuild.serving.memory import GIB, RESERVE, Memory, check, parse_meminfo


def gib(value: float) -> int:
    return int(value * GIB)


def test_a_gb10_that_just_wrote_60_gib_fails_what_it_passes_once_its_page_cache_is_dropped():
    # a GB10 with 60 GiB of files just written: CUDA's free figure 41.52 GiB, MemAvailable 115.65 GiB
    loaded = Memory(total=gib(121.69), free=gib(41.52) + RESERVE, available=gib(115.65))
    verdict = check(loaded, 0.85)
    assert not verdict.passes and verdict.utilization == 0.33 and verdict.after_drop == 0.83
    assert "about 41.52 GiB free of 121.69 GiB" in verdict.line
    assert "0.33 passes now, 0.83 once the page cache is dropped (MemAvailable 115.65 GiB)" in verdict.line
    # the same node before the write: 103.25 GiB free, which 0.84 fits and 0.85 does not
    fresh = Memory(total=gib(121.69), free=gib(103.25) + RESERVE, available=gib(115.65))
    assert check(fresh, 0.84).passes and not check(fresh, 0.85).passes


def test_two_sparks_with_their_caches_dropped_never_pass_0_87_and_run_at_0_82():
    # the recipe's default 0.87 wants 105.87 GiB of 121.69; free capped at 101.3-102.2 GiB
    for free in (101.3, 102.2):
        verdict = check(Memory(total=gib(121.69), free=gib(free) + RESERVE, available=gib(free) + RESERVE), 0.87)
        assert not verdict.passes and "asks 105.87 GiB" in verdict.line
        assert verdict.utilization in (0.82, 0.83) and verdict.after_drop == verdict.utilization


def test_this_machines_meminfo_gives_a_verdict_consistent_with_its_numbers():
    memory = parse_meminfo(Path("/proc/meminfo").read_text())
    assert 0 < memory.free <= memory.available <= memory.total
    for asked in (0.05, 0.5, 0.95):
        verdict = check(memory, asked)
        assert verdict.passes == (memory.free - RESERVE >= asked * memory.total)
        assert verdict.utilization <= verdict.after_drop <= 1
        if verdict.utilization >= 0.01:
            assert check(memory, verdict.utilization).passes  # what it offers passes


def test_a_meminfo_without_its_fields_is_named():
    with pytest.raises(ValueError, match="no MemAvailable"):
        parse_meminfo("MemTotal: 1000 kB\nMemFree: 10 kB\n")


@pytest.mark.docker
def test_drop_caches_frees_the_page_cache_through_a_container_with_cap_sys_admin(docker_engine, tmp_path):
    from enginebuild.oci.engine import Engine
    from enginebuild.serving.driver import Reached, meminfo
    from enginebuild.serving.nodes import Node
    from helpers.docker import docker
    from helpers.inprocess import run_in_process
    from helpers.specs import write_image

    ws = tmp_path / "repo"
    (ws / "lockfiles").mkdir(parents=True)
    write_image(ws, "m", "base: scratch\nplatform: linux/amd64\nsystem:\n  install: extract\n"
                         "  packages: [python3]\n", {})
    assert run_in_process(["lock", "m"], ws).returncode == 0
    tag = f"enginebuild-test/meminfo:{uuid.uuid4().hex[:8]}"
    assert run_in_process(["image", "m", "-t", tag], ws).returncode == 0
    try:
        # 1 GiB read through the page cache, then dropped: MemFree grows by most of it
        cached = tmp_path / "cached.bin"
        cached.write_bytes(os.urandom(1 << 20) * 1024)
        with open(cached, "rb") as handle:
            while handle.read(1 << 24):
                pass
        each = Reached(Node("here", "127.0.0.1"), Engine())
        before = parse_meminfo(meminfo(each, tag, "memtest"))
        after = parse_meminfo(meminfo(each, tag, "memtest", drop=True))
        assert after.free - before.free > 512 << 20, (before, after)
    finally:
        docker("rmi", "-f", tag, "enginebuild/m:latest", check=False)
