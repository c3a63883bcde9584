"""The command line: verbs, --help, exit codes (0 ok, 1 failed, 2 bad input or usage)."""
import json
import re
import subprocess
import sys

import pytest

from conftest import ROOT
from helpers.inprocess import run_in_process
from helpers.specs import write_image

VERBS = ["list", "lock", "plan", "render", "fetch", "image", "push", "patches", "sign", "verify", "reproduce", "doctor", "gc",
         "schema"]


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_has_help(verb):
    proc = run_in_process([verb, "--help"], ROOT)
    assert proc.returncode == 0
    assert proc.stdout.startswith(f"usage: BUILD.py {verb}")


def test_the_top_level_help_lists_every_verb():
    proc = run_in_process(["--help"], ROOT)
    assert proc.returncode == 0
    for verb in VERBS:
        assert f"    {verb}" in proc.stdout


def test_usage_errors_exit_2():
    assert run_in_process(["frobnicate"], ROOT).returncode == 2
    assert run_in_process(["image"], ROOT).returncode == 2
    assert run_in_process(["image", "demo", "--build-arg", "no-equals-sign"], ROOT).returncode == 2


def test_global_options_are_taken_after_the_verb_and_an_unknown_option_shows_the_verbs_usage():
    before = run_in_process(["--set", "env.PORT=9000", "-q", "render", "demo", "--platform", "linux/amd64"], ROOT)
    after = run_in_process(["render", "demo", "--platform", "linux/amd64", "-q", "--set", "env.PORT=9000"], ROOT)
    assert before.returncode == after.returncode == 0, after.stderr
    assert after.stdout == before.stdout and 'PORT="9000"' in after.stdout
    # after a verb's action too, wherever they stand: each place's values are kept
    quiet = [run_in_process(argv, ROOT) for argv in (["-q", "patches", "check", "demo"],
                                                    ["patches", "-q", "check", "demo"],
                                                    ["patches", "check", "demo", "-q", "--progress", "plain"])]
    assert [p.returncode for p in quiet] == [0, 0, 0], quiet[-1].stderr
    assert quiet[0].stdout == quiet[1].stdout == quiet[2].stdout and quiet[0].stderr == quiet[2].stderr == ""
    proc = run_in_process(["plan", "demo", "--pull"], ROOT)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: BUILD.py plan ")
    assert proc.stderr.rstrip().endswith("error: unrecognized arguments: --pull")


@pytest.mark.network
def test_progress_takes_dockers_modes(tmp_path, pypi_reachable, debian_reachable):
    """--progress=plain|tty|quiet|auto, before or after the verb, as Docker's: plain writes whole
    lines, quiet nothing; tty (the live line even when piped) is accepted."""
    home = {"ENGINEBUILD_HOME": str(tmp_path / "home")}  # a fresh store: fetch has work to report
    args = ["fetch", "demo", "--platform", "linux/amd64"]
    plain = run_in_process([*args, "--progress=plain"], ROOT, env=home)
    assert plain.returncode == 0 and "\r" not in plain.stderr and "downloading" in plain.stderr, plain.stderr
    home = {"ENGINEBUILD_HOME": str(tmp_path / "home2")}
    quiet = run_in_process(["--progress", "quiet", *args], ROOT, env=home)
    assert quiet.returncode == 0 and quiet.stderr == ""
    home = {"ENGINEBUILD_HOME": str(tmp_path / "home3")}
    tty = run_in_process([*args, "--progress=tty"], ROOT, env=home)
    assert tty.returncode == 0 and "downloading" in tty.stderr, tty.stderr[:500]
    assert run_in_process([*args, "--progress=loud"], ROOT).returncode == 2


def test_push_options_without_push_and_several_images_into_one_repository_are_refused():
    proc = run_in_process(["image", "demo", "--to", "127.0.0.1:5000/x", "--push-tag", "1"], ROOT)
    assert proc.returncode == 2 and "--to and --push-tag only take effect with --push" in proc.stderr, proc.stderr
    proc = run_in_process(["image", "demo", "llamacpp-cpu", "--push", "--to", "127.0.0.1:5000/x"], ROOT)
    assert proc.returncode == 2 and "with 2 images would push them all into one repository" in proc.stderr


def test_an_unknown_image_exits_2_with_a_suggestion():
    proc = run_in_process(["plan", "dmeo"], ROOT)
    assert proc.returncode == 2
    assert proc.stderr == "error: no image named 'dmeo' (looked for images/dmeo/image.yaml)\n  hint: did you mean 'demo'?\n"


def test_list_shows_the_demo_as_locked():
    proc = run_in_process(["list"], ROOT)
    assert proc.returncode == 0
    row = next(line for line in proc.stdout.splitlines() if line.startswith("demo "))
    assert "linux/amd64" in row and "locked" in row


def test_build_py_is_the_entry_point():
    proc = subprocess.run([sys.executable, str(ROOT / "BUILD.py"), "list"], capture_output=True, text=True)
    assert proc.returncode == 0 and "demo" in proc.stdout


@pytest.mark.network
def test_an_installed_enginebuild_command_is_the_same_program(tmp_path, pypi_reachable):
    from helpers.installed import install_enginebuild

    command = str(install_enginebuild(tmp_path))
    ours = subprocess.run([command, "list", "--json"], cwd=ROOT, capture_output=True, text=True)
    theirs = subprocess.run([sys.executable, str(ROOT / "BUILD.py"), "list", "--json"], capture_output=True, text=True)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout == theirs.stdout
    version = subprocess.run([command, "--version"], cwd=tmp_path, capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == "enginebuild 0.1.0"

    # a recipe repository of its own, outside this checkout: found from any folder inside it
    repo = tmp_path / "my-recipes"
    (repo / "images/mine").mkdir(parents=True)
    (repo / "images/mine/image.yaml").write_text("base: scratch\nplatform: linux/amd64\nenv: {A: b}\n")
    (repo / "enginebuild.yaml").write_text("{}\n")
    for cwd in (repo, repo / "images/mine"):
        listed = subprocess.run([command, "list", "--json"], cwd=cwd, capture_output=True, text=True)
        assert listed.returncode == 0, listed.stderr
        assert [row["image"] for row in json.loads(listed.stdout)] == ["mine"]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    wrong = subprocess.run([command, "plan", "mien"], cwd=repo, capture_output=True, text=True)
    assert wrong.returncode == 2 and "did you mean 'mine'" in wrong.stderr
    unlocked = subprocess.run([command, "plan", "mine", "--locked"], cwd=repo, capture_output=True, text=True)
    assert unlocked.returncode == 1 and "run `enginebuild lock mine`" in unlocked.stderr, unlocked.stderr
    usage = subprocess.run([command, "plan", "--bogus"], cwd=repo, capture_output=True, text=True)
    assert usage.returncode == 2 and usage.stderr.startswith("usage: enginebuild plan ")
    lost = subprocess.run([command, "list"], cwd=outside, capture_output=True, text=True)
    assert lost.returncode == 2 and "no recipe repository here" in lost.stderr and "Traceback" not in lost.stderr
    assert subprocess.run([command, "schema"], cwd=outside, capture_output=True).returncode == 0


@pytest.mark.docker
def test_image_all_builds_every_buildable_image_and_names_the_ones_it_skips(tmp_path, docker_engine, debian_reachable):
    from helpers.specs import write_image

    repo = tmp_path / "repo"
    (repo / "lockfiles").mkdir(parents=True)
    small = ("base: scratch\nplatform: linux/amd64\nsystem: {install: extract, packages: [busybox-static]}\n"
             "env: {WHO: NAME}\n")
    for name in ("alpha-all", "beta-all", "gamma-all"):
        write_image(repo, name, small.replace("NAME", name))
    write_image(repo, "shared-all", "abstract: true\nenv: {A: b}\n")
    for name in ("alpha-all", "beta-all"):
        assert run_in_process(["lock", name], repo).returncode == 0
    proc = run_in_process(["image", "--all"], repo)
    assert proc.returncode == 0, proc.stderr
    assert "gamma-all: skipped, not buildable here" in proc.stdout + proc.stderr
    built = re.findall(r"^(\S+) \(linux/amd64\): .* -> (\S+)$", proc.stdout, re.M)
    assert [name for name, _ in built] == ["alpha-all", "beta-all"], proc.stdout
    assert run_in_process(["image", "--all", "alpha-all"], repo).returncode == 2  # one or the other


def test_reproduce_says_the_same_verdicts_as_text_and_as_json():
    """What `reproduce` prints for an image with one differing layer, in both forms (the rebuild
    itself is test_reproduce's, which reads the text)."""
    from enginebuild.execution.reproduce import LayerVerdict, Reproduction

    same, stamp = "sha256:" + "a" * 64, ("sha256:" + "b" * 64, "sha256:" + "c" * 64)
    found = Reproduction("demo", "linux/amd64", "the local build", [
        LayerVerdict(1, "system packages", same, same),
        LayerVerdict(2, "step stamp", *stamp, diff=["/stamp: sha256 1234… (expected 5678…)"])], "sha256:c1", "sha256:c2", 3.2)
    text = found.lines()
    assert text[1].startswith("  same    layer 1 system packages: sha256:aaaaaaaaaaaa")
    assert text[2] == f"  DIFFERS layer 2 step stamp: {stamp[1][:19]} (expected {stamp[0][:19]})"
    assert text[3] == "      /stamp: sha256 1234… (expected 5678…)"
    assert text[-1] == "demo (linux/amd64): NOT reproducible" and not found.ok
    doc = json.loads(json.dumps(found.to_json()))
    assert doc["ok"] is False and doc["config"] == {"expected": "sha256:c1", "actual": "sha256:c2"}
    assert [(la["stage"], la["same"], la["differences"]) for la in doc["layers"]] == [
        ("system packages", True, []), ("step stamp", False, ["/stamp: sha256 1234… (expected 5678…)"])]


def test_the_checkouts_own_state_folder_is_ignored_by_git(tmp_path):
    """`.enginebuild/` (the mutex of commands that write lockfiles) never shows in `git status`."""
    from helpers.gitrepo import Repo

    repo = Repo(tmp_path / "recipes")
    write_image(repo.path, "t", "base: scratch\nplatform: linux/amd64\nfiles:\n  /opt/x: x\n", {"x": "x\n"})
    (repo.path / "lockfiles").mkdir()
    proc = run_in_process(["lock", "t"], repo.path)
    assert proc.returncode == 0, proc.stderr
    assert (repo.path / ".enginebuild").is_dir()
    untracked = repo.git("status", "--porcelain", "--untracked-files=all").splitlines()
    assert untracked and not [line for line in untracked if ".enginebuild" in line], untracked


def test_a_platform_as_other_tools_name_it_gets_a_did_you_mean(workspace):
    write_image(workspace, "t", "base: scratch\nplatform: linux/aarch64\n")
    proc = run_in_process(["render", "t", "--unpinned"], workspace)
    assert proc.returncode == 2 and "images/t/image.yaml:2: platform: expected a platform such as linux/arm64, " \
        "got string 'linux/aarch64'" in proc.stderr and "hint: did you mean linux/arm64?" in proc.stderr, proc.stderr
    write_image(workspace, "t", "base: scratch\nplatforms: [linux/amd64, linux/arm64]\n")
    proc = run_in_process(["render", "t", "--unpinned", "--platform", "x86_64"], workspace)
    assert proc.returncode == 2 and "not x86_64" in proc.stderr and "did you mean linux/amd64?" in proc.stderr, \
        proc.stderr


def test_help_is_a_verb_and_the_version_names_its_commit():
    for argv, first in ((["help"], "usage: BUILD.py [-h]"), (["help", "gc"], "usage: BUILD.py gc [-h]")):
        proc = subprocess.run([sys.executable, str(ROOT / "BUILD.py"), *argv], cwd=ROOT, capture_output=True,
                              text=True)
        assert proc.returncode == 0 and proc.stdout.startswith(first), proc.stdout + proc.stderr
    proc = subprocess.run([sys.executable, str(ROOT / "BUILD.py"), "--version"], cwd=ROOT, capture_output=True,
                          text=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("enginebuild "), proc.stdout + proc.stderr
    if head.returncode == 0:  # a source checkout names its commit
        assert f"(commit {head.stdout.strip()}" in proc.stdout, proc.stdout


def test_an_extra_index_that_does_not_answer_is_named(workspace):
    """uv's last line ("Connection refused") says nothing of which index: the lock names it, by
    its name in the spec and its URL."""
    write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\npython:\n  version: \"3.11\"\n"
                                "  indexes:\n    extra: \"http://127.0.0.1:9/simple\"\n"
                                "  requirements:\n    - {requirement: mypkg==1.0, index: extra}\n")
    proc = run_in_process(["lock", "t"], workspace, env={"UV_HTTP_RETRIES": "0"})  # refused at once: no retries
    assert "uv could not read index extra (http://127.0.0.1:9/simple): http://127.0.0.1:9/simple/mypkg/" \
        in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_lock_fails_where_plan_would_say_not_buildable(workspace):
    """A base pinned by the spec whose config cannot be read here is pinned only in part: `plan`
    says the image is not buildable until `lock` resolves it, and `lock` does not exit 0."""
    write_image(workspace, "t", f"base: 127.0.0.1:9/x/y@sha256:{'a' * 64}\nplatform: linux/amd64\n")
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "t: runtime.base@linux/amd64 is pinned only in part: pinned by the spec; its config could not be read" \
        in proc.stderr, proc.stderr
    assert "not buildable until `lock` resolves: runtime.base@linux/amd64" in run_in_process(["plan", "t"], workspace).stdout


def test_plan_for_a_platform_the_lock_does_not_pin_names_the_lock(workspace):
    """A platform added to the spec and not locked yet: `plan` says what `lock` would add for it,
    never that a builder cannot build it."""
    spec = workspace / "images/demo/image.yaml"
    spec.write_text(spec.read_text().replace("platforms: [linux/amd64, linux/arm64]",
                                             "platforms: [linux/amd64, linux/arm64, linux/ppc64le]"))
    proc = run_in_process(["plan", "demo", "--platform", "linux/ppc64le"], workspace)
    said = proc.stdout + proc.stderr
    assert "would change the lock: runtime.system@linux/ppc64le: not in the lock" in said, said
    assert "not buildable until `lock` resolves" in said and "builder" not in said.split("\n", 1)[0], said
    assert "Traceback" not in said


def test_a_mistyped_verb_or_action_gets_a_did_you_mean():
    proc = run_in_process(["imgae", "demo"], ROOT)
    assert proc.returncode == 2 and "hint: did you mean 'image'?" in proc.stderr, proc.stderr
    proc = run_in_process(["serve", "stpo"], ROOT)
    assert proc.returncode == 2 and "hint: did you mean 'stop'?" in proc.stderr, proc.stderr


@pytest.mark.parametrize("argv, answered", [
    (["demo"], (["demo"], [], [])),
    (["demo", "qwen", "--platform", "linux/amd64"], (["demo", "qwen"], ["linux/amd64"], [])),
    (["demo", "--platform=linux/arm64", "--locked"], (["demo"], ["linux/arm64"], [])),
    (["demo", "--plat", "linux/arm64"], (["demo"], ["linux/arm64"], [])),  # an abbreviation, as argparse takes it
    (["demo", "--push", "--to", "reg/x", "--push-tag", "v1"], (["demo"], [], ["--push", "--to", "reg/x", "--tag", "v1"])),
    (["demo", "-t", "mine:1"], None),  # the full command tags
    (["demo", "--no-cache"], None),
    (["demo", "--jobs", "2"], None),
    (["demo", "--bogus"], None),
    (["demo", "--locked", "--frozen"], None),  # refused by the command: said there
    (["demo", "--push"], None),  # no --to: the full command says so
    (["demo", "--to", "reg/x"], None),
    (["demo", "--platform", "linux"], None),
])
def test_the_no_op_path_parses_image_with_the_commands_own_grammar(argv, answered):
    """fastpath.py answers `image` from the parser the command uses (commands/arguments.py), and
    only when every option it was given leaves the image as built: one grammar, two paths."""
    from enginebuild.commands.arguments import image_parser
    from enginebuild.fastpath import _image_args

    assert _image_args(argv) == answered
    if answered is not None:  # the command reads the same names and platforms
        args = image_parser().parse_args(argv)
        assert (args.images, args.platform) == (answered[0], answered[1])
