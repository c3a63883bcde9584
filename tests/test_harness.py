"""The suite's CLI calls run as forked children of a server that imported enginebuild once
(conftest.run_cli) or in the test's own process (helpers/inprocess.py); each must behave as a fresh
`python -m enginebuild` does: same stdout, stderr and exit code, in its own folder, and a call in
process leaves the process as it found it."""
import os
import signal
import subprocess
import sys

from conftest import ROOT, run_cli
from helpers.inprocess import run_in_process


def fresh(args, cwd, env=None, input=None):
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "enginebuild", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, input=input, timeout=300)


def test_a_forked_call_and_a_call_in_process_answer_as_a_fresh_interpreter_does(workspace):
    for args in (["list"], ["plan", "demo"], ["plan", "no-such-image"], ["--no-such-option"],
                 ["render", "demo", "--set", "runtime.python.version=x"], ["lock", "demo", "--check"]):
        real = fresh(args, workspace)
        expected = (real.returncode, real.stdout, real.stderr)
        forked, here = run_cli(args, cwd=workspace), run_in_process(args, cwd=workspace)
        assert (forked.returncode, forked.stdout, forked.stderr) == expected, ("forked", args)
        assert (here.returncode, here.stdout, here.stderr) == expected, ("in process", args)


def test_a_call_in_process_leaves_the_folder_environment_streams_and_signal_handlers_as_they_were(workspace,
                                                                                                   tmp_path):
    before = (os.getcwd(), dict(os.environ), sys.stdout, sys.stderr, sys.stdin, sys.argv,
              signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    done = run_in_process(["plan", "demo"], cwd=workspace, env={"ENGINEBUILD_HOME": str(tmp_path / "home")})
    assert done.returncode == 0 and "demo" in done.stdout
    failed = run_in_process(["plan", "no-such-image"], cwd=workspace)
    assert failed.returncode == 2 and "no-such-image" in failed.stderr
    after = (os.getcwd(), dict(os.environ), sys.stdout, sys.stderr, sys.stdin, sys.argv,
             signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    assert after == before


def test_each_call_runs_in_its_own_folder_and_leaves_the_suite_where_it_was(workspace, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = os.getcwd()
    outside = run_cli(["plan", "demo"], cwd=elsewhere)
    assert outside.returncode == 2 and "no recipe repository here" in outside.stderr
    assert run_cli(["plan", "demo"], cwd=workspace).returncode == 0
    assert os.getcwd() == before
