"""`patches check` against real sources: local git repositories, and real vLLM sdists from PyPI."""
import json
import shutil
import textwrap

import pytest

from helpers.gitrepo import Repo
from helpers.inprocess import run_in_process
from helpers.specs import write_image, write_patch

BUGGY = textwrap.dedent("""\
    # the engine's runner

    def aux_layers(cfg):
        \"\"\"Which hidden states the drafter reads.\"\"\"
        layer_ids = cfg["target_layer_ids"]
        return tuple(layer_ids)
    """)
FIXED = BUGGY.replace('layer_ids = cfg["target_layer_ids"]', 'layer_ids = [i + 1 for i in cfg["target_layer_ids"]]')
REWRITTEN = BUGGY.replace('layer_ids = cfg["target_layer_ids"]', 'layer_ids = shift(cfg.get("target_layer_ids", []))')

FIX_PATCH = """\
    Subject: add one to each drafter layer id
    Description: drafters count the embeddings as state 0.
    Upstream: https://example.invalid/pull/1
    Fixed-In: 1.3
    ---
    diff --git a/engine/runner.py b/engine/runner.py
    --- a/engine/runner.py
    +++ b/engine/runner.py
    @@ -3,4 +3,4 @@
     def aux_layers(cfg):
         \"\"\"Which hidden states the drafter reads.\"\"\"
    -    layer_ids = cfg["target_layer_ids"]
    +    layer_ids = [i + 1 for i in cfg["target_layer_ids"]]
         return tuple(layer_ids)
    """

NOTE_PATCH = """\
    Subject: document the layer ids
    Description: a second patch, touching the same function.
    Upstream: not forwarded
    ---
    diff --git a/engine/runner.py b/engine/runner.py
    --- a/engine/runner.py
    +++ b/engine/runner.py
    @@ -3,3 +3,3 @@
     def aux_layers(cfg):
    -    \"\"\"Which hidden states the drafter reads.\"\"\"
    +    \"\"\"Which hidden states the drafter reads (ids counted after the embeddings).\"\"\"
         layer_ids = [i + 1 for i in cfg["target_layer_ids"]]
    """


@pytest.fixture(scope="module")
def upstream_template(tmp_path_factory, git_available):
    """The engine's upstream history, made once for this file's tests (each gets a copy)."""
    repo = Repo(tmp_path_factory.mktemp("template") / "engine-upstream")
    commits = {
        "v1.0": repo.commit({"engine/runner.py": BUGGY, "engine/config.py": "X = 1\n"}, "1.0", tag="v1.0"),
        "v1.1": repo.commit({"engine/runner.py": "import os\n\n\n" + BUGGY}, "1.1", tag="v1.1"),
        "v1.2": repo.commit({"engine/runner.py": "import os\n\n\n" + FIXED}, "1.2", tag="v1.2"),
        "v1.3": repo.commit({"engine/runner.py": "import os\n\n\n" + REWRITTEN}, "1.3", tag="v1.3"),
        "v1.4": repo.commit({"engine/runner.py": ("symlink", "/etc/hostname")}, "1.4", tag="v1.4"),
    }
    return repo, commits


@pytest.fixture
def upstream(tmp_path, upstream_template):
    template, commits = upstream_template
    return Repo.copy_of(template, tmp_path / "engine-upstream"), dict(commits)


@pytest.fixture
def image(workspace, upstream):
    repo, _ = upstream
    write_patch(workspace, "engine/0001-layer-ids.patch", FIX_PATCH)
    write_patch(workspace, "engine/0002-docstring.patch", NOTE_PATCH)
    write_image(workspace, "t", f"""
        base: scratch
        platform: linux/amd64
        components:
          engine:
            source:
              git: {{url: "{repo.url}", ref: v1.0}}
            patches: [engine/0001-layer-ids.patch, engine/0002-docstring.patch]
            build: {{script: build.sh}}
            outputs: {{paths: [/usr/local/bin/engine]}}
        """, {"build.sh": "#!/bin/sh\ntrue\n"})
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    return workspace


def check(workspace, *extra):
    proc = run_in_process(["patches", "check", "t", "--json", *extra], workspace)
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    return proc.returncode, {p["name"]: p for p in doc[0]["patches"]}


def test_the_pinned_stack_applies(image):
    code, patches = check(image)
    assert code == 0
    assert patches["engine/0001-layer-ids.patch"]["status"] == "applies"
    assert patches["engine/0001-layer-ids.patch"]["hunks"] == [
        {"file": "engine/runner.py", "hunk": 1, "header": "@@ -3,4 +3,4 @@", "offset": 0}]


def test_a_moved_function_applies_with_the_offset_reported(image):
    code, patches = check(image, "--engine", "v1.1")
    assert code == 0
    assert [h["offset"] for h in patches["engine/0001-layer-ids.patch"]["hunks"]] == [3]
    assert [h["offset"] for h in patches["engine/0002-docstring.patch"]["hunks"]] == [3]


def test_a_change_already_upstream_is_reported_and_fails_the_check(image):
    code, patches = check(image, "--engine", "v1.2")
    assert code == 1
    assert patches["engine/0001-layer-ids.patch"]["status"] == "already-upstream"
    assert patches["engine/0002-docstring.patch"]["status"] == "applies"


def test_a_patch_whose_header_says_it_is_fixed_is_obsolete(image):
    code, patches = check(image, "--engine", "v1.3")
    assert code == 1
    assert patches["engine/0001-layer-ids.patch"]["status"] == "obsolete"
    assert "fixed it in 1.3" in patches["engine/0001-layer-ids.patch"]["detail"]


def test_a_conflict_names_file_hunk_and_what_the_source_has_instead(image, workspace):
    patch = workspace / "patches/engine/0001-layer-ids.patch"
    patch.write_text(patch.read_text().replace("Fixed-In: 1.3\n", ""))
    proc = run_in_process(["patches", "check", "t", "--engine", "v1.3"], workspace)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[1] == ("  conflicts         engine/0001-layer-ids.patch  engine/runner.py: hunk 1 @@ -3,4 +3,4 @@: "
                        "the source differs from the hunk's context")
    assert "      the source has (from line 6):" in lines
    assert '        |     layer_ids = shift(cfg.get("target_layer_ids", []))' in lines


def test_writing_through_a_symlink_of_the_source_is_a_conflict(image):
    code, patches = check(image, "--engine", "v1.4")
    assert code == 1
    conflict = patches["engine/0002-docstring.patch"]["conflict"]
    assert conflict["problem"] == "writes through a symlink in the source (engine/runner.py)"


def test_obsolescence_by_commit_follows_git_ancestry(image, upstream, workspace):
    _, commits = upstream
    patch = workspace / "patches/engine/0001-layer-ids.patch"
    patch.write_text(patch.read_text().replace("Fixed-In: 1.3", f"Fixed-In: commit {commits['v1.2'][:10]}"))
    assert check(image, "--engine", "v1.1")[1]["engine/0001-layer-ids.patch"]["status"] == "applies"
    assert check(image, "--engine", "v1.3")[1]["engine/0001-layer-ids.patch"]["status"] == "obsolete"


def test_engine_override_does_not_touch_the_lock(image):
    before = (image / "lockfiles/t.lock").read_bytes()
    check(image, "--engine", "v1.3")
    assert (image / "lockfiles/t.lock").read_bytes() == before


def test_a_hostile_patch_is_refused_when_the_spec_loads(image, workspace):
    patch = workspace / "patches/engine/0002-docstring.patch"
    patch.write_text(patch.read_text().replace("a/engine/runner.py", "a/../outside.py").replace(
        "b/engine/runner.py", "b/../outside.py"))
    for command in (["patches", "check", "t"], ["lock", "--check", "t"], ["render", "t"]):
        proc = run_in_process(command, workspace)
        assert proc.returncode == 2
        assert proc.stderr.startswith("error: images/t/image.yaml:")
        assert "components.engine.patches[1]: patches/engine/0002-docstring.patch:6: path 'a/../outside.py' " \
               "leaves the tree" in proc.stderr


# -- the mission's vLLM patches against the real sdists from PyPI -----------------------------

@pytest.fixture
def vllm_image(workspace, pypi_reachable):
    write_image(workspace, "v", """
        base: scratch
        platform: linux/arm64
        components:
          vllm:
            source:
              pypi: {version: 0.21.0}
            patches:
              - vllm/0001-dflash-target-layer-ids-off-by-one.patch
              - vllm/0002-qwen3-next-supports-eagle3.patch
            build: {script: build.sh}
            outputs: {wheels: /out}
        """, {"build.sh": "#!/bin/sh\ntrue\n"})
    assert run_in_process(["lock", "v"], workspace).returncode == 0
    return workspace


@pytest.mark.network
def test_the_vllm_stack_applies_to_the_021_sdist(vllm_image):
    proc = run_in_process(["patches", "check", "v"], vllm_image)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  applies           vllm/0001-dflash-target-layer-ids-off-by-one.patch  1 hunk(s) at offset 0" in proc.stdout
    assert "  applies           vllm/0002-qwen3-next-supports-eagle3.patch  2 hunk(s) at offset 0" in proc.stdout


@pytest.mark.network
def test_on_022_the_off_by_one_fix_is_obsolete_and_the_check_fails(vllm_image):
    proc = run_in_process(["patches", "check", "v", "--engine", "0.22.0", "--json"], vllm_image)
    assert proc.returncode == 1
    patches = {p["name"]: p for p in json.loads(proc.stdout)[0]["patches"]}
    assert patches["vllm/0001-dflash-target-layer-ids-off-by-one.patch"]["status"] in ("obsolete", "already-upstream")
    assert patches["vllm/0002-qwen3-next-supports-eagle3.patch"]["status"] == "applies"


@pytest.mark.network
def test_on_024_the_supports_eagle3_marker_is_already_upstream(vllm_image):
    proc = run_in_process(["patches", "check", "v", "--engine", "0.24.0", "--json"], vllm_image)
    assert proc.returncode == 1
    patches = {p["name"]: p for p in json.loads(proc.stdout)[0]["patches"]}
    assert patches["vllm/0002-qwen3-next-supports-eagle3.patch"]["status"] == "already-upstream"


def test_a_stack_whose_source_is_not_pinned_here_is_reported_not_checked_never_skipped(workspace, git_available):
    write_patch(workspace, "engine/0001-layer-ids.patch", FIX_PATCH)
    write_image(workspace, "t", """
        base: scratch
        platform: linux/amd64
        components:
          engine:
            source:
              git: {url: "file:///nonexistent/engine-upstream", ref: v1.0}
            patches: [engine/0001-layer-ids.patch]
            build: {script: build.sh}
            outputs: {paths: [/x]}
        """, {"build.sh": "#!/bin/sh\ntrue\n"})
    assert run_in_process(["lock", "t"], workspace).returncode == 1  # recorded as unresolved
    proc = run_in_process(["patches", "check", "t"], workspace)
    assert proc.returncode == 0
    assert "  NOT CHECKED       engine/0001-layer-ids.patch  its source is not pinned here" in proc.stdout
    assert "warning: t: the engine stack (1 patch(es)) was NOT checked" in proc.stderr
    assert run_in_process(["patches", "check", "t", "--strict"], workspace).returncode == 1


def test_a_pinned_stack_whose_source_is_out_of_reach_is_reported_not_checked_with_the_others_checked(
        image, upstream, workspace, tmp_path):
    """Pinned in the lock, but the source cannot be fetched from here (no network, no mirror, on a
    store that never fetched it): that stack is NOT CHECKED with git's reason, the other stacks are
    still checked, and --strict fails."""
    repo, _ = upstream
    write_image(workspace, "u", f"""
        base: scratch
        platform: linux/amd64
        components:
          engine:
            source:
              git: {{url: "{(tmp_path / "gone").as_uri()}", ref: v1.0}}
            patches: [engine/0001-layer-ids.patch]
            build: {{script: build.sh}}
            outputs: {{paths: [/x]}}
        """, {"build.sh": "#!/bin/sh\ntrue\n"})
    shutil.copytree(repo.path, tmp_path / "gone")
    assert run_in_process(["lock", "u"], workspace).returncode == 0
    shutil.rmtree(tmp_path / "gone")
    env = {"ENGINEBUILD_HOME": str(tmp_path / "fresh-home")}
    proc = run_in_process(["patches", "check", "t", "u", "--json"], workspace, env)
    assert proc.returncode == 0, proc.stderr
    docs = {d["image"]: d for d in json.loads(proc.stdout)}
    assert [p["status"] for p in docs["t"]["patches"]] == ["applies", "applies"]
    assert [p["status"] for p in docs["u"]["patches"]] == ["not-checked"]
    assert docs["u"]["unchecked_because"].startswith("its pinned source could not be fetched: fetching file://")
    assert "warning: u: the engine stack (1 patch(es)) was NOT checked: its pinned source could not be fetched" \
        in proc.stderr
    assert run_in_process(["patches", "check", "t", "u", "--strict"], workspace, env).returncode == 1


@pytest.mark.network
def test_an_engine_version_that_is_not_a_release_is_bad_input(vllm_image):
    proc = run_in_process(["patches", "check", "v", "--engine", "0.24"], vllm_image)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --engine 0.24:")


def test_one_unloadable_stack_does_not_hide_the_others(image, workspace, pypi_reachable):
    write_patch(workspace, "engine/0003-broken.patch", "Subject: x\n---\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n")
    write_image(workspace, "broken", """
        base: scratch
        platform: linux/amd64
        components:
          e:
            source: {path: src}
            patches: [engine/0003-broken.patch]
            build: {script: build.sh}
            outputs: {paths: [/x]}
        """, {"src/f": "a\n", "build.sh": "#!/bin/sh\ntrue\n"})
    proc = run_in_process(["patches", "check", "--all", "--json"], workspace)
    assert proc.returncode == 2
    docs = json.loads(proc.stdout)
    assert any(d.get("image") == "t" and d.get("checked") for d in docs)
    assert any(d.get("image") == "broken" and "header lacks" in d.get("error", "") for d in docs)


def test_a_crlf_conflict_shows_the_carriage_returns(workspace, git_available, tmp_path):
    repo = Repo(tmp_path / "crlf")
    repo.commit({"f.txt": "one\r\ntwo\r\nthree\r\n"}, "crlf", tag="v1")
    write_patch(workspace, "c/0001-x.patch", "Subject: x\nDescription: y\nUpstream: z\n---\n"
                "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n")
    write_image(workspace, "c", f"""
        base: scratch
        platform: linux/amd64
        components:
          c:
            source: {{git: {{url: "{repo.url}", ref: v1}}}}
            patches: [c/0001-x.patch]
            build: {{script: build.sh}}
            outputs: {{paths: [/x]}}
        """, {"build.sh": "#!/bin/sh\ntrue\n"})
    assert run_in_process(["lock", "c"], workspace).returncode == 0
    proc = run_in_process(["patches", "check", "c"], workspace)
    assert proc.returncode == 1
    assert "        | two\\r" in proc.stdout and "        | two\n" in proc.stdout


@pytest.mark.network
def test_a_rename_with_a_change_of_a_real_vllm_file_applies_as_git_applies_it(vllm_image, eb_home, tmp_path,
                                                                             git_available):
    """A patch written by `git diff -M` that moves one of vLLM 0.21.0's model files and edits it,
    as a backport across a release that moved the file would: `patches check` against the real
    sdist says it applies, and the applier's tree is git apply's, byte for byte and mode."""
    import subprocess
    import tarfile

    from enginebuild.core.patchfile import parse_patch
    from enginebuild.io.store import Store
    from enginebuild.patches.check import check_stack
    from enginebuild.sources.trees import DirTree

    assert run_in_process(["patches", "check", "v"], vllm_image).returncode == 0  # the sdist is in the store now
    lock = json.loads((vllm_image / "lockfiles/v.lock").read_text())
    pin = next(e["resolved"] for k, e in lock["inputs"].items() if k.startswith("components.vllm"))
    path, moved = "vllm/model_executor/models/qwen3_next.py", "vllm/model_executor/models/qwen3_next_model.py"
    with tarfile.open(Store(eb_home).path(pin["sha256"])) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/" + path))
        original = tar.extractfile(member).read()

    def git(*args, cwd):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                              capture_output=True).stdout

    made = tmp_path / "made"
    (made / path).parent.mkdir(parents=True)
    (made / path).write_bytes(original)
    git("init", "-q", cwd=made)
    git("add", "-A", cwd=made)
    git("commit", "-qm", "0.21.0", cwd=made)
    git("mv", path, moved, cwd=made)
    lines = original.split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(b"class "))
    lines.insert(at, b"# moved here by a backport")
    (made / moved).write_bytes(b"\n".join(lines))
    git("add", "-A", cwd=made)
    diff = git("diff", "--cached", "-M", cwd=made).decode()
    assert "rename from " + path in diff and "rename to " + moved in diff
    header = "Subject: move the model file\nDescription: a backport's move\nUpstream: not forwarded: a test\n---\n"
    write_patch(vllm_image, "vllm/0003-move-model-file.patch", header + diff)
    spec = vllm_image / "images/v/image.yaml"
    spec.write_text(spec.read_text().replace("vllm/0002-qwen3-next-supports-eagle3.patch",
                                             "vllm/0002-qwen3-next-supports-eagle3.patch\n"
                                             "      - vllm/0003-move-model-file.patch"))
    proc = run_in_process(["patches", "check", "v", "--json"], vllm_image)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    statuses = {p["name"]: p["status"] for p in json.loads(proc.stdout)[0]["patches"]}
    assert statuses["vllm/0003-move-model-file.patch"] == "applies", statuses

    theirs = tmp_path / "git-apply"  # the real file, patched by git apply alone
    (theirs / path).parent.mkdir(parents=True)
    (theirs / path).write_bytes(original)
    (tmp_path / "p.diff").write_text(diff)
    git("apply", str(tmp_path / "p.diff"), cwd=theirs)
    ours = tmp_path / "ours"
    (ours / path).parent.mkdir(parents=True)
    (ours / path).write_bytes(original)
    outcome = check_stack([parse_patch("vllm/0003.patch", (header + diff).encode())], DirTree(ours, "0.21.0 file"))
    assert outcome.ok
    assert outcome.files == {path: None, moved: (theirs / moved).read_bytes()} and not (theirs / path).exists()
    assert outcome.modes[moved] == 0o644


def test_engine_moves_every_stack_on_that_source_without_component(workspace, upstream, tmp_path):
    """A split image (a compiled part and a Python part, both on the engine's source, as
    qwen36-dflash is): `--engine` checks both stacks against the version asked for; with a stack
    on another source too, it asks which, and `--component` picks the source by one of its stacks."""
    repo, _ = upstream
    other = Repo(tmp_path / "plugin-upstream")
    other.commit({"plugin.py": "A = 1\n"}, "1.0", tag="v1.0")
    write_patch(workspace, "engine/0001-layer-ids.patch", FIX_PATCH)
    write_patch(workspace, "plugin/0001-a.patch", """\
        Subject: A is two
        Description: the plugin's A is two.
        Upstream: not yet

        diff --git a/plugin.py b/plugin.py
        --- a/plugin.py
        +++ b/plugin.py
        @@ -1 +1 @@
        -A = 1
        +A = 2
        """)
    part = """
          {name}:
            source:
              git: {{url: "{url}", ref: v1.0}}
            patches: [{patch}]
            build: {{script: build.sh}}
            outputs: {{paths: [/usr/local/bin/{name}]}}"""
    engine = part.format(name="engine", url=repo.url, patch="engine/0001-layer-ids.patch") + \
        part.format(name="engine-py", url=repo.url, patch="engine/0001-layer-ids.patch")
    write_image(workspace, "split", f"""
        base: scratch
        platform: linux/amd64
        components:{engine}
        """, {"build.sh": "#!/bin/sh\ntrue\n"})
    write_image(workspace, "mixed", f"""
        base: scratch
        platform: linux/amd64
        components:{engine}{part.format(name="plugin", url=other.url, patch="plugin/0001-a.patch")}
        """, {"build.sh": "#!/bin/sh\ntrue\n"})
    assert run_in_process(["lock", "split", "mixed"], workspace).returncode == 0
    proc = run_in_process(["patches", "check", "split", "--engine", "v1.3", "--json"], workspace)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert {d["component"]: (d["override"], d["patches"][0]["status"]) for d in doc} == {
        "engine": (True, "obsolete"), "engine-py": (True, "obsolete")}
    proc = run_in_process(["patches", "check", "mixed", "--engine", "v1.3"], workspace)
    assert proc.returncode == 2
    assert "several sources" in proc.stderr and "engine, engine-py" in proc.stderr and "plugin" in proc.stderr
    proc = run_in_process(["patches", "check", "mixed", "--engine", "v1.3", "--component", "engine-py", "--json"], workspace)
    assert proc.returncode == 1, proc.stderr
    doc = {d["component"]: d for d in json.loads(proc.stdout)}
    assert doc["engine"]["override"] and doc["engine-py"]["override"] and not doc["plugin"]["override"]
    assert doc["plugin"]["patches"][0]["status"] == "applies"
