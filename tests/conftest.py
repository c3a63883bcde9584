"""Shared fixtures: real parts only (a Docker engine, registries, git, PyPI).

Under CI=true a test that needs a part that is missing fails; elsewhere it skips and
says what is missing.
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from helpers import registry as registry_helpers  # noqa: E402
from helpers import report  # noqa: E402

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


# the mirror of TurboQuant's pinned commit (GitHub is out of reach from these machines)
TURBOQUANT_BUNDLE = ROOT.parent / "shared" / "mirrors" / "github.com-0xSero-turboquant.bundle"
TURBOQUANT_MIRROR = {"ENGINEBUILD_GIT_MIRRORS": f"https://github.com/0xSero/turboquant={TURBOQUANT_BUNDLE}"}


def need(condition: bool, what: str) -> None:
    """Skip (locally) or fail (under CI=true) when a real part is missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI=true but {what}")
    pytest.skip(what)


def need_free_disk(path: Path, gigabytes: float, what: str) -> None:
    """A real-scale test says first how much disk it needs (and fails under CI=true, skips
    elsewhere) rather than failing somewhere in the middle of a build on a full disk. Short of it,
    what the test worker's own engine keeps for nothing is freed first (its build cache and its
    untagged images: everything in that engine is the suite's, docker_engine); still short, the
    message says what that engine and this run's folders hold."""
    free = shutil.disk_usage(path).free / 1e9
    if free < gigabytes and os.environ.get("DOCKER_HOST"):  # the worker's own engine (docker_engine)
        for argv in (["builder", "prune", "-af"], ["image", "prune", "-f"]):
            subprocess.run(["docker", *argv], capture_output=True, timeout=600)
        free = shutil.disk_usage(path).free / 1e9
    held = ""
    if free < gigabytes:
        engine = subprocess.run(["docker", "system", "df"], capture_output=True, text=True, timeout=120).stdout
        base = Path(tempfile.gettempdir())
        sizes = subprocess.run(["du", "-s", "-x", "--block-size=1M", *[str(p) for p in path.parents[:4]]],
                               capture_output=True, text=True, timeout=600).stdout
        held = f"\nthe worker's engine holds:\n{engine}\nfolders (MiB):\n{sizes}(temporary files under {base})"
    need(free >= gigabytes, f"{what} needs {gigabytes:.0f} GB free at {path}; {free:.1f} GB are{held}")


@pytest.fixture(scope="session")
def eb_home(tmp_path_factory) -> Path:
    """One enginebuild home (store, git mirrors, history) for the whole session."""
    home = Path(os.environ.get("ENGINEBUILD_TEST_HOME") or tmp_path_factory.mktemp("eb-home"))
    os.environ["ENGINEBUILD_HOME"] = str(home)
    return home


@pytest.fixture(scope="session")
def cache_signing_key(tmp_path_factory) -> Path:
    """The key every run of the suite signs registry-cache entries with (ENGINEBUILD_CACHE_KEY), as
    a CI job's secret would be: so a fresh home (a "fresh runner") trusts what another pushed.
    Tests of the trust itself set their own keys, or none."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = tmp_path_factory.mktemp("cache-key") / "cache-signing.pem"
    path.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    path.chmod(0o600)
    return path


@pytest.fixture(autouse=True)
def _isolated_home(eb_home, cache_signing_key, monkeypatch):
    from enginebuild.settings import reset_settings

    monkeypatch.setenv("ENGINEBUILD_HOME", str(eb_home))
    monkeypatch.setenv("ENGINEBUILD_CACHE_KEY", str(cache_signing_key))
    monkeypatch.setenv("ENGINEBUILD_HTTP_BACKOFF", "0.05")
    reset_settings()
    yield
    reset_settings()


@pytest.fixture
def workspace(tmp_path) -> Path:
    """A private copy of the recipe repository (images, patches, lockfiles) to edit freely."""
    dest = tmp_path / "repo"
    dest.mkdir()
    for name in ("images", "patches", "lockfiles"):
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, dest / name, symlinks=True)
    (dest / "lockfiles").mkdir(exist_ok=True)
    return dest


@functools.lru_cache(maxsize=1)
def cli_server():
    """The server that forks a child per CLI call (tests/helpers/zygote.py), one per test process."""
    from helpers.zygote import Zygote

    server = Zygote(ROOT)
    atexit.register(server.close)
    return server


_TESTS_WITH_CHILDREN: set = set()


def _count_child() -> None:
    """The suite's figure of CLI child processes (printed in its report): how many were started, and
    by how many tests (a test that runs the CLI in process starts none)."""
    from helpers import report

    report.count("CLI child processes", "started")
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    if test not in _TESTS_WITH_CHILDREN:
        _TESTS_WITH_CHILDREN.add(test)
        report.count("CLI child processes", "tests that start one")


def run_cli(args, cwd: Path, env: dict | None = None, timeout: float = 1800, input: str | None = None):
    """Run `python -m enginebuild ARGS` in a checkout; never lets a traceback pass unnoticed."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(ROOT / "src")
    full_env.update(env or {})
    _count_child()
    started = time.monotonic()
    if os.environ.get("ENGINEBUILD_TEST_ZYGOTE", "1") != "0":  # a forked child of a server that imported it
        proc = cli_server().run([str(a) for a in args], cwd, full_env, timeout, input)
    else:
        proc = subprocess.run([sys.executable, "-m", "enginebuild", *map(str, args)], cwd=cwd, env=full_env,
                              capture_output=True, text=True, timeout=timeout, input=input)
    report.called(["enginebuild", *args], time.monotonic() - started)
    if proc.returncode in (0, 1, 2):
        assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory):
    """The Docker engine tests build with. Each test process (every pytest-xdist worker, and a run
    without xdist) starts an engine of its own (data root, socket, bridge) and points DOCKER_HOST
    at it for the rest of its session: parallel tests never see each other's images, tags or build
    cache, and the suite never sees, tags over or removes what a user keeps in the machine's own
    engine (scripts/test.sh plants some there and counts them after the run)."""
    from enginebuild.oci.engine import Engine

    need(shutil.which("docker") is not None, "no docker client installed")
    need(Engine().ping(), "no Docker engine answers (run scripts/setup.sh)")
    from helpers.engines import start_engine

    need(os.geteuid() == 0 and shutil.which("dockerd") is not None and shutil.which("ip") is not None,
         "a parallel test worker's own Docker engine needs root, dockerd and ip")
    own = start_engine(tmp_path_factory.mktemp("worker-engine"), index=15)
    os.environ["DOCKER_HOST"] = own.host
    try:
        yield Engine()
    finally:
        os.environ.pop("DOCKER_HOST", None)
        own.stop()


def _serve_registry(tmp_path_factory, start, name):
    need(shutil.which("docker-registry") is not None, "docker-registry is not installed (run scripts/setup.sh)")
    server = start(tmp_path_factory.mktemp(name))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """A real distribution registry on 127.0.0.1, started for this session."""
    yield from _serve_registry(tmp_path_factory, registry_helpers.start_registry, "registry")


@pytest.fixture(scope="session")
def token_registry(tmp_path_factory):
    """A real registry that demands Bearer tokens from a real token service."""
    yield from _serve_registry(tmp_path_factory, registry_helpers.start_token_registry, "token-registry")


def _reachable(method: str, url: str) -> bool:
    import requests

    try:
        return requests.request(method, url, timeout=20).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture(scope="session")
def pypi_reachable():
    need(_reachable("GET", "https://pypi.org/pypi/six/json"), "PyPI is not reachable")
    return True


@pytest.fixture(scope="session")
def debian_reachable():
    need(_reachable("HEAD", "http://deb.debian.org/debian/dists/bookworm/InRelease"), "Debian's archive is not reachable")
    return True


@pytest.fixture(scope="session")
def git_available():
    need(shutil.which("git") is not None, "git is not installed")
    return True


# The parts outside the process a fixture stands for, and the marker it gives the tests that use
# it (directly or through other fixtures): a test's tier follows from what it uses, so a test
# that needs Docker cannot be counted in the fast tier.
OUTSIDE = {"docker_engine": "docker", "registry": "registry", "token_registry": "registry",
           "pypi_reachable": "network", "debian_reachable": "network", "small_disk": "docker"}
SLOW_MARKS = {"docker", "network", "registry"}


# The slow tier runs on parallel workers (scripts/test.sh), a test file at a time to one worker (its
# module fixtures are made once); the fast tier a test at a time. Files listed in LONG_FIRST go
# first, longest first (from a clean-clone run's `--durations`), so that no worker is left with a
# long file at the end; files listed in DEMO_FREE go last; the rest follow LONG_FIRST in the order
# they are collected. The three real-scale builds share one worker: each wants both CPUs of a
# 2-CPU machine (compiling llama.cpp, wheel layers and loads of GBs) and ~30 GB of free disk; side
# by side they only slow each other (a run with them on two workers: llama.cpp's setup 34 min
# instead of 10). DEMO_FREE are the slow files that never build the demo image: the worker freed
# by the real-scale group finds only those left and never builds the demo itself (both platforms
# from nothing: about 75 s of a worker on two cores).
LONG_FIRST = {"test_code_quality.py": None,  # mypy --strict over src/: the fast tier's longest test
              "test_llamacpp_serving.py": "real-scale", "test_mission_image.py": "real-scale",
              "test_vllm_scale.py": "real-scale", "test_reproduce.py": None, "test_publish.py": None,
              "test_secrets.py": None, "test_compiler_cache.py": None, "test_platforms.py": None,
              "test_integrity.py": None, "test_cache.py": None, "test_build.py": None, "test_bake.py": None,
              "test_kernels.py": None, "test_atomic.py": None, "test_cli.py": None, "test_patch_build.py": None}
DEMO_FREE = ("test_builders.py", "test_constructs.py", "test_python_scale.py", "test_python_lock.py",
             "test_fastedit.py", "test_progress.py", "test_unpack.py", "test_registry_faults.py",
             "test_containers.py", "test_declared_inputs.py", "test_gc.py", "test_patches_check.py",
             "test_per_build_lock.py", "test_resolvers.py", "test_injection.py", "test_release_component.py",
             "test_export.py")


def _queue_position(name: str) -> int:
    if name in LONG_FIRST:
        return list(LONG_FIRST).index(name)
    if name in DEMO_FREE:
        return len(LONG_FIRST) + 1 + DEMO_FREE.index(name)
    return len(LONG_FIRST)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Every test gets the markers of the outside parts its fixtures need; one that needs none is
    `fast` (`scripts/test.sh --fast` runs those alone, with no engine and no network reachable).
    Each test also gets its pytest-xdist group: its file's (or its file's shared group)."""
    for item in items:
        for fixture in set(getattr(item, "fixturenames", ())) & set(OUTSIDE):
            item.add_marker(getattr(pytest.mark, OUTSIDE[fixture]))
        if not {m.name for m in item.iter_markers()} & SLOW_MARKS:
            item.add_marker(pytest.mark.fast)
        name = item.path.name
        item.add_marker(pytest.mark.xdist_group(LONG_FIRST.get(name) or name))
    items.sort(key=lambda item: _queue_position(item.path.name))


def pytest_sessionfinish(session):
    """A pytest-xdist worker hands its reliability figures to the controller."""
    from helpers import report

    if hasattr(session.config, "workeroutput"):
        session.config.workeroutput["reliability"] = report.export()


def pytest_testnodedown(node, error):
    from helpers import report

    report.merge(getattr(node, "workeroutput", {}).get("reliability", {}))


def pytest_runtest_logreport(report):
    from helpers import report as figures

    worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")
    figures.took(worker, report.nodeid.split("::")[0], report.duration)


def pytest_terminal_summary(terminalreporter):
    from helpers import report

    if report.TIMES and not hasattr(terminalreporter.config, "workeroutput"):
        for line in report.time_lines():
            terminalreporter.write_line(line)
        report.write_times(ROOT / "build" / "test-times.json", terminalreporter.config.getoption("markexpr") or "all")

    if report.FIGURES and not hasattr(terminalreporter.config, "workeroutput"):
        for line in report.render():
            terminalreporter.write_line(line)
        report.write(ROOT / "build" / "reliability-report.json")


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MB tmpfs: a disk that fills up."""
    need(os.geteuid() == 0, "mounting a small tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True)
    need(done.returncode == 0, f"cannot mount a tmpfs: {done.stderr.decode()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)
