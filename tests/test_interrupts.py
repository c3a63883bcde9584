"""SIGTERM behaves like Ctrl-C: the build is cancelled (its builder stopped, no image appears
later), temporary files are removed, one clear line is printed, and the exit code is 143
(130 for SIGINT). A start-up sweep removes what a SIGKILLed run left; a full disk is a clear
error that leaves no partial file."""
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from enginebuild.io.store import Store
from enginebuild.lock.lockfile import read_lock
from enginebuild.plan.image import Options, plan_image
from enginebuild.recipe.catalog import Catalog
from helpers import report
from helpers.specs import write_image
from test_integrity import HANGING, hanging_files


def children(pid: int) -> set[int]:
    """Every process below `pid`, read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def sleepers(salt: str) -> list[str]:
    """Processes of this build's slow step (BuildKit's steps are processes of this machine,
    outside any `docker ps`), found by the salt their shell is named after."""
    return subprocess.run(["pgrep", "-f", f"sleeper-{salt}"], capture_output=True, text=True).stdout.split()


def leftovers(home: Path, *pids: int) -> list[str]:
    """Temporaries a stopped run left: in the home's tmp, the store's partial blobs (`.ingest`),
    and, of its processes (`pids`), secrets folders and what they staged in memory. Other runs on
    this machine (a parallel test worker's) have their own home and their own processes."""
    found = [p.name for p in (home / "tmp").glob(".*")] if (home / "tmp").exists() else []
    found += [p.name for p in Store(home).root.glob(".ingest.*")] if Store(home).root.is_dir() else []
    for pid in pids:
        found += [p.name for p in Path("/tmp").glob(f".enginebuild-secrets.{pid}.*")]
        found += [p.name for p in Path("/dev/shm").glob(f".*.{pid}.*")]
    return found


@pytest.mark.docker
@pytest.mark.network
@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_a_signal_during_a_build_cancels_it_removes_temporaries_and_exits(workspace, docker_engine, eb_home, sig,
                                                                          code, word, debian_reachable):
    files = hanging_files()
    write_image(workspace, "hang", HANGING.replace("MODE: hang", "MODE: short"), files)
    assert run_cli(["lock", "hang"], workspace).returncode == 0
    spec = Catalog(workspace).load("hang")
    slow = next(c for c in plan_image(spec, read_lock(workspace, spec), "linux/amd64", Options()).components
                if c.name == "slow")
    announced = eb_home / "faults" / "buildkit.running"
    announced.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), ENGINEBUILD_FAULT="buildkit.running:component slow=announce")
    proc = subprocess.Popen([sys.executable, "-m", "enginebuild", "image", "hang"], cwd=workspace, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 900
    while not announced.exists():  # the state: the never-ending component build is running
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    deadline = time.monotonic() + 120
    while not sleepers(files["slow/salt"]):  # the build step itself runs
        assert time.monotonic() < deadline
        time.sleep(0.1)
    below = children(proc.pid)
    assert below, "the build runs in a child process"
    assert leftovers(eb_home, proc.pid, *below)  # its context and secrets folder exist while it runs
    began = time.monotonic()
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    took = time.monotonic() - began
    assert proc.returncode == code, stderr
    assert f"{word}: what was in progress was cancelled and its temporary files removed" in stderr
    assert "Traceback" not in stderr
    assert [pid for pid in below if alive(pid)] == []  # the builder child is stopped, not orphaned
    assert leftovers(eb_home, proc.pid, *below) == []
    # Docker 20.10's BuildKit lets a cancelled step's processes run to their end; whatever
    # they make is never named or recorded: wait for the step's end, then look
    deadline = time.monotonic() + 120
    while sleepers(files["slow/salt"]):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert docker_engine.image_id(f"enginebuild/component:{slow.key}") is None
    assert Store(eb_home).record("outputs", slow.key) is None
    report.peak("interrupts", f"{word} build: most seconds from signal to exit", round(took, 2))


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("verb", [["fetch", "demo", "--platform", "linux/amd64"], ["plan", "demo"],
                                  ["push", "demo", "--to", "127.0.0.1:9/nowhere/demo"]])
def test_the_start_up_sweep_removes_what_killed_runs_left_and_nothing_else(workspace, eb_home, tmp_path, verb):
    dead, mine = dead_pid(), os.getpid()
    temp = Path(tempfile.gettempdir())  # the system's temporary folder (TMPDIR), where the secrets folder goes
    places = [eb_home / "tmp", eb_home / "cas" / "sha256", eb_home / "cas" / "sha256" / "ab",
              eb_home / "records" / "layers", temp]
    stale, live = [], []
    for place in places:
        place.mkdir(parents=True, exist_ok=True)
        for pid, bucket in ((dead, stale), (mine, live)):
            path = place / f".context.{pid}.0123abcd.part"
            path.write_bytes(b"x" * 1000)
            bucket.append(path)
    folder = temp / f".enginebuild-secrets.{dead}.0123abcd.d"
    folder.mkdir()
    (folder / "HF_TOKEN").write_text("hf_x")
    stale.append(folder)
    if Path("/dev/shm").is_dir():  # a wheel a killed run was unpacking in memory
        unpacking = Path("/dev/shm") / f".enginebuild-wheel.{dead}.0123abcd.d"
        (unpacking / "torch").mkdir(parents=True)
        (unpacking / "torch" / "__init__.py").write_bytes(b"x" * 1000)
        stale.append(unpacking)
    keep = eb_home / "tmp" / "notes.txt"  # not a temporary of ours
    keep.write_text("kept")
    proc = run_cli(verb, workspace)  # whatever the verb then does (push has no registry there), it swept first
    assert [p for p in stale if p.exists()] == []
    assert all(p.exists() for p in live) and keep.exists()
    for path in live:
        path.unlink()
    report.count("interrupts", "stale temporaries swept at start-up", len(stale))
    assert proc.returncode in (0, 1, 2)  # the sweep runs first, whatever the network does


def all_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".lock") and p.name != "lock"]


@pytest.mark.network
def test_a_full_disk_while_fetching_is_a_clear_error_that_leaves_no_partial_file(workspace, small_disk,
                                                                               debian_reachable, pypi_reachable):
    proc = run_cli(["fetch", "demo"], workspace, env={"ENGINEBUILD_HOME": str(small_disk)})
    assert proc.returncode == 1
    assert f"no space left on the device holding {small_disk}" in proc.stderr, proc.stderr
    assert "nothing partial was kept" in proc.stderr and "Traceback" not in proc.stderr
    names = [p.name for p in all_files(small_disk)]
    assert [n for n in names if n.startswith(".")] == []  # no .part, no temporary
    report.count("interrupts", "full disks met with a clear error")


@pytest.mark.docker
@pytest.mark.network
def test_a_full_disk_while_writing_a_build_context_is_a_clear_error(workspace, small_disk, eb_home, docker_engine,
                                                                    debian_reachable):
    write_image(workspace, "big", HANGING.replace("MODE: hang", "MODE: go"),
                {**hanging_files(), "slow/blob.bin": os.urandom(4 << 20)})  # a context larger than the disk
    assert run_cli(["lock", "big"], workspace).returncode == 0
    assert run_cli(["fetch", "big"], workspace).returncode == 0
    home = small_disk
    (home / "cas").symlink_to(eb_home / "cas")  # downloads on the large disk; temporaries on the small one
    proc = run_cli(["image", "big"], workspace, env={"ENGINEBUILD_HOME": str(home)})
    assert proc.returncode == 1, proc.stderr
    assert "no space left on the device holding" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    partial = [p for p in all_files(home / "tmp") if p.stat().st_size] if (home / "tmp").exists() else []
    assert partial == []


def to_thread(pid: int, name: str, sig: int) -> None:
    """`sig` sent to a thread of `pid` other than its main one (tgkill), as the kernel may hand a
    process's signal to any thread that does not block it; `name`: the thread expected (Python
    3.11 does not name its threads for the kernel, so the first started is taken)."""
    import ctypes

    tids = sorted(int(t.name) for t in Path(f"/proc/{pid}/task").iterdir() if int(t.name) != pid)
    assert tids, f"no thread but the main one in {pid} ({name} was expected)"
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(234 if os.uname().machine == "x86_64" else 131, pid, tids[0], sig) == 0  # SYS_tgkill


@pytest.mark.docker
@pytest.mark.network
@pytest.mark.parametrize("to", ["process", "writer thread", "process starting a thread"])
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_a_layer_is_written_exits_cleanly_without_a_finaliser_traceback(workspace, eb_home, sig, code, to,
                                                                                      docker_engine, debian_reachable):
    """Whichever thread the kernel hands the signal to: one taken by the thread writing the layer
    (the main thread waiting on it) once left the run waiting forever. And wherever the main
    thread is: one that arrived while it started the preloader's thread (the thread listed, not
    yet started) once ended in a traceback from joining a thread that never started."""
    name = f"sig-{uuid.uuid4().hex[:6]}"
    write_image(workspace, name, "base: scratch\nplatform: linux/amd64\nfiles:\n  /opt/: \"*.txt\"\n",
                {"a.txt": uuid.uuid4().hex, "b.txt": uuid.uuid4().hex})  # a.txt is in the tar's buffer at b.txt
    assert run_cli(["lock", name], workspace).returncode == 0
    point, fault = ("background.start", "background.start:enginebuild-preload=stall") \
        if to == "process starting a thread" else ("tar.entry", "tar.entry:/opt/b.txt=stall")
    announced = eb_home / "faults" / point
    announced.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), ENGINEBUILD_FAULT=fault)
    proc = subprocess.Popen([sys.executable, "-m", "enginebuild", "image", name], cwd=workspace, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not announced.exists():  # the state: the files layer's tar is being written (or a thread starts)
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    if to.startswith("process"):
        proc.send_signal(sig)
    else:
        to_thread(proc.pid, "enginebuild-layer", sig)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert leftovers(eb_home, proc.pid) == []  # the layer's partial blob too (a worker thread was writing it)
    report.count("interrupts", "signals during a layer write met cleanly")
