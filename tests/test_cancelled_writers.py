"""A run that stops (a full disk, an error, a signal) while a layer writer unpacks a wheel into
memory: the writer stops before its next file, its stage in /dev/shm is removed, and the run
waits for that before it leaves (before, a writer still at work when the process left kept its
stage: 2-3 MB left in /dev/shm after a disk-full build, 2 runs of 4)."""
from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest

from enginebuild.io.background import Background, Cancelled
from enginebuild.io.files import MEMORY_TMP
from enginebuild.io.tars import TarWriter
from enginebuild.layerkinds.installer import install_wheel
from enginebuild.settings import reset_settings
from helpers.pyindex import make_wheel


def staged_here() -> list[str]:
    return [p.name for p in Path(MEMORY_TMP).glob(f".enginebuild-wheel*.{os.getpid()}.*")]


def test_a_cancelled_run_stops_its_writer_at_the_next_file_and_removes_its_stage(tmp_path, monkeypatch):
    if not Path(MEMORY_TMP).is_dir():
        pytest.skip(f"{MEMORY_TMP} is not here: wheels are staged on disk")
    files = {f"many/m{i:04d}.py": f"X = {i}\n" for i in range(200)}
    wheel = make_wheel(tmp_path / "wheels", "many", "1.0", files=files)
    monkeypatch.setenv("ENGINEBUILD_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ENGINEBUILD_FAULT", "installer.file:many/m0100.py=wait")
    reset_settings()
    held = tmp_path / "home" / "faults" / "installer.file"
    pool = Background(1, "enginebuild-layer")
    writer = TarWriter(io.BytesIO(), mtime=1)
    task = pool.submit(lambda: install_wheel(wheel, wheel.name, "/usr/lib/python3/dist-packages", "/usr/bin/python3",
                                             writer))
    deadline = time.monotonic() + 60
    while not held.exists():  # the writer is half-way through the wheel, its stage in memory
        assert time.monotonic() < deadline and not task.done(), task.exception() if task.done() else "not reached"
        time.sleep(0.01)
    assert staged_here()
    pool.cancel()  # the run stops: cancelled, not waited for yet
    held.unlink()  # the writer goes on from where it was held
    pool.cancel(wait_s=60)  # what the executor does on its way out
    assert not any(t.is_alive() for t in pool.threads)
    assert isinstance(task.exception(), Cancelled)
    assert staged_here() == []
