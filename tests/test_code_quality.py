"""The code is held to its own rules in the test run itself: ruff (pyflakes, pycodestyle,
import order, bugbear, pyupgrade) on src, tests and bench, and `mypy --strict` on src
(pyproject.toml holds both configurations), and on the fakes in memory (against the protocols they stand for)."""
import os
import subprocess
import sys

from conftest import ROOT


def test_ruff_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "src", "tests", "bench"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_finds_nothing():
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found" in proc.stdout


def test_the_fakes_in_memory_are_held_to_the_engine_and_registry_protocols():
    """The engine and registry in memory (tests of the build loop in process) stand where
    `EngineApi` and `RegistryApi` stand: mypy --strict checks each fake against its protocol, so a
    protocol that changes and a fake that does not fail here, not in a test that happens to call it."""
    helpers = [str(ROOT / "tests/helpers/memengine.py"), str(ROOT / "tests/helpers/memregistry.py")]
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", str(ROOT / "pyproject.toml"),
                           *helpers], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "MYPYPATH": str(ROOT / "src")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
