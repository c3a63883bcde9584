"""A patch's behaviour checks (patches/<component>/<name>.checks.yaml), run in the image `image`
builds: a passing one is said and recorded under the image's ID; one whose expected output is
wrong fails the build naming patch, check, command and both outputs; an unchanged image is not
checked again and a changed check is; a check that needs a GPU is listed as not run, never as
passed; `patches check --behaviour` builds the image without the patch and says whether the
engine still needs it."""
from __future__ import annotations

import json

import pytest

from helpers.inprocess import run_in_process

pytestmark = [pytest.mark.docker, pytest.mark.network]

AMD64 = ["--platform", "linux/amd64"]
CHECKS = "patches/demo-engine/0001-aux-layer-ids-off-by-one.checks.yaml"


def test_a_passing_check_is_said_recorded_and_not_run_again_for_the_same_image(workspace, docker_engine):
    first = run_in_process(["image", "demo", *AMD64], workspace)
    assert first.returncode == 0, first.stderr
    assert "patches: demo (linux/amd64): patch checks ok: 1 of 1 passed" in first.stderr, first.stderr
    again = run_in_process(["image", "demo", *AMD64, "-q", "--progress", "plain"], workspace)  # past the no-op answer
    assert again.returncode == 0, again.stderr
    verify = run_in_process(["verify", "demo", *AMD64], workspace)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "patch checks ok: 1 of 1 passed (recorded when image sha256:" in verify.stdout, verify.stdout
    doc = json.loads(run_in_process(["verify", "demo", *AMD64, "--json"], workspace).stdout)
    ran = doc["patch_checks"][0]["checks"][0]
    assert ran["status"] == "passed" and ran["output"].strip() == "aux_hidden_state_layers=(2, 17, 32, 47, 62)"


def test_a_check_expecting_the_wrong_output_fails_the_build_naming_patch_command_and_outputs(workspace, docker_engine):
    path = workspace / CHECKS
    path.write_text(path.read_text().replace('expect: "aux_hidden_state_layers=(2, 17, 32, 47, 62)"',
                                             'expect: "aux_hidden_state_layers=(9, 9)"'))
    proc = run_in_process(["image", "demo", *AMD64], workspace)
    assert proc.returncode == 1, proc.stderr
    assert "error: a patch's behaviour check failed:" in proc.stderr
    assert ("FAILED demo-engine/0001-aux-layer-ids-off-by-one.patch: drafter-ids-to-taps: `demo-engine --model m "
            "--aux-layers 1,16,31,46,61 --dry-run 1 | grep aux_hidden_state_layers` printed "
            "'aux_hidden_state_layers=(2, 17, 32, 47, 62)', expected 'aux_hidden_state_layers=(9, 9)'") in proc.stderr
    # the check put right, in other words (a regular expression): a changed check is run again, not
    # answered from the record of the same image's earlier run
    path.write_text(path.read_text().replace('expect: "aux_hidden_state_layers=(9, 9)"',
                                             'expect-match: "aux_hidden_state_layers=\\\\(2, 17, 32, 47, 62\\\\)"'))
    again = run_in_process(["image", "demo", *AMD64], workspace)
    assert again.returncode == 0 and "patch checks ok: 1 of 1 passed in" in again.stderr, again.stderr


def test_a_check_that_needs_a_gpu_is_listed_as_not_run_with_why(workspace, docker_engine):
    path = workspace / CHECKS
    path.write_text(path.read_text() + "  - name: on-the-gpu\n    run: nvidia-smi\n    expect-match: \".*GPU.*\"\n"
                                       "    needs: [gpu]\n")
    proc = run_in_process(["image", "demo", *AMD64], workspace)
    assert proc.returncode == 0, proc.stderr
    assert ("NOT RUN demo-engine/0001-aux-layer-ids-off-by-one.patch: on-the-gpu: needs a GPU: this engine has no "
            "NVIDIA runtime to give it one") in proc.stderr, proc.stderr
    assert "patch checks ok: 1 of 1 passed, 1 not run" in proc.stderr
    verify = run_in_process(["verify", "demo", *AMD64], workspace)
    assert "NOT RUN demo-engine/0001-aux-layer-ids-off-by-one.patch: on-the-gpu: needs a GPU" in verify.stdout
    assert "1 of 1 passed, 1 not run" in verify.stdout


def test_behaviour_says_the_demo_engine_still_needs_its_patch(workspace, docker_engine):
    proc = run_in_process(["patches", "check", "demo", "--behaviour"], workspace)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "demo: at the lock's pin (linux/amd64), built without demo-engine/0001-aux-layer-ids-off-by-one.patch" \
        in proc.stdout, proc.stdout
    assert "drafter-ids-to-taps          still needed  printed 'aux_hidden_state_layers=(1, 16, 31, 46, 61)'" \
        in proc.stdout
    # the build without the patch has tags of its own: the image the user built keeps its tags
    doc = json.loads(run_in_process(["patches", "check", "demo", "--behaviour", "--json"], workspace).stdout)[0]
    assert doc["checks"][0]["behaviour"] == "still needed" and doc["checks"][0]["text"] == "applies"
    plan = json.loads(run_in_process(["plan", "demo", "--json", *AMD64], workspace).stdout)["images"][0]
    assert plan["tag"] == "enginebuild/demo:latest-amd64"


def test_a_check_that_prints_a_gigabyte_fails_as_printing_too_much_and_is_read_no_further(workspace, docker_engine):
    """A 100-byte check that prints 1 GiB (any PR that edits a .checks.yaml reaches this) is
    stopped once enginebuild has read 1 MiB of it: the build fails naming the limit."""
    path = workspace / CHECKS
    path.write_text(path.read_text() + "  - name: floods\n    run: \"yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -c 1073741824\"\n"
                                       "    expect: a\n    timeout: 300s\n")
    proc = run_in_process(["image", "demo", *AMD64], workspace)
    assert proc.returncode == 1, proc.stderr
    assert "floods: `yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -c 1073741824` printed more than 1 MiB and was stopped" \
        in proc.stderr, proc.stderr
    assert "patch checks FAILED: 1 of 2 passed" in proc.stderr  # the other check ran as ever


@pytest.mark.parametrize("pattern", ["(a+)+", "(?:a|aa)+b"])
def test_a_pattern_that_backtracks_is_bounded_in_time(workspace, docker_engine, pattern):
    """The probe's `(a+)+` over 26 characters took 7 s in enginebuild's own process (x2-3 a
    character); now matched with a time bound: it answers at once, or the check fails naming it."""
    path = workspace / CHECKS
    path.write_text(path.read_text() + f"  - name: backtracks\n    run: \"echo {'a' * 40}\"\n"
                                       f"    expect-match: '{pattern}'\n")
    proc = run_in_process(["image", "demo", *AMD64], workspace)
    if pattern == "(a+)+":
        assert proc.returncode == 0 and "patch checks ok: 2 of 2 passed" in proc.stderr, proc.stderr
    else:
        assert proc.returncode == 1, proc.stderr
        assert "matching /(?:a|aa)+b/ against its 40 characters of output took over 2 s" in proc.stderr, proc.stderr


def test_python_checks_that_begin_with_the_same_import_share_it_and_one_not_passing_there_is_judged_alone(
        workspace, docker_engine):
    """`python:` checks whose first statements import the same modules run in one container that
    imports them once (`this` prints the Zen of Python at its import: each check's output begins
    with what that import printed, as alone); a check that does not pass there is run again in a
    container of its own, and that run is its verdict (here the one that passes only alone). Both
    ways, the image's bytecode is trusted: no layer above it holds a `.py` (checks/imports.py)."""
    code = ('import this\nimport os, _imp\n'
            'print("{name}", "alone" if os.getppid() == 0 else "forked", _imp.check_hash_based_pycs)\n')
    path = workspace / CHECKS
    extra = ""
    for name, where in (("one", "forked"), ("two", "forked"), ("three", "alone")):
        body = "\n".join("      " + line for line in code.format(name=name).splitlines())
        extra += f"  - name: {name}\n    python: |\n{body}\n    expect-match: '(?s)The Zen of Python.*{name} {where} never'\n"
    path.write_text(path.read_text() + extra)
    proc = run_in_process(["image", "demo", *AMD64], workspace)
    assert proc.returncode == 0, proc.stderr
    assert "patch checks ok: 4 of 4 passed" in proc.stderr, proc.stderr
    doc = json.loads(run_in_process(["verify", "demo", *AMD64, "--json"], workspace).stdout)
    said = {run["check"]: run["output"] for run in doc["patch_checks"][0]["checks"]}
    assert said["one"].startswith("The Zen of Python, by Tim Peters\n") and said["three"].startswith("The Zen")
