"""The suite's CLI calls (conftest.run_cli) run as forked children of a server that imported
enginebuild once; each must behave as a fresh `python -m enginebuild` does: same stdout, stderr and
exit code, in its own folder."""
import os
import subprocess
import sys

from conftest import ROOT, run_cli


def fresh(args, cwd, env=None, input=None):
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "enginebuild", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, input=input, timeout=300)


def test_a_forked_call_answers_as_a_fresh_interpreter_does(workspace):
    for args in (["list"], ["plan", "demo"], ["plan", "no-such-image"], ["--no-such-option"],
                 ["render", "demo", "--set", "runtime.python.version=x"]):
        forked, real = run_cli(args, cwd=workspace), fresh(args, workspace)
        assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr), args


def test_each_call_runs_in_its_own_folder_and_leaves_the_suite_where_it_was(workspace, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = os.getcwd()
    outside = run_cli(["plan", "demo"], cwd=elsewhere)
    assert outside.returncode == 2 and "no recipe repository here" in outside.stderr
    assert run_cli(["plan", "demo"], cwd=workspace).returncode == 0
    assert os.getcwd() == before
