"""The runtime's file layers are written by enginebuild without a builder. These tests hold that
path to what BuildKit makes of the Dockerfile `render --out` gives for the same runtime: the same
files (content, mode, owner, link targets), env, labels, entrypoint, ports, stop signal and
healthcheck. A change that runs a command still goes through BuildKit."""
import hashlib
import json
import os
import subprocess
import uuid

import pytest

from conftest import run_cli
from helpers.docker import docker, filesystem, inspect

pytestmark = [pytest.mark.docker, pytest.mark.network]

AMD64 = ["--platform", "linux/amd64"]
CONFIG_KEYS = ("Env", "Labels", "Entrypoint", "Cmd", "ExposedPorts", "StopSignal", "Healthcheck", "WorkingDir",
               "User", "Volumes")


def config(ref: str) -> dict:
    conf = inspect(ref)["Config"]
    return {key: conf.get(key) or None for key in CONFIG_KEYS}


def buildkit_build(context, tag: str) -> None:
    """`docker build` of a rendered folder, through the BuildKit client enginebuild itself drives."""
    from enginebuild.execution.buildkit import detect_builder

    builder = detect_builder()
    build = [builder.docker, "buildx", "build", "--load"] if builder.kind == "buildx" else [builder.docker, "build"]
    built = subprocess.run([*build, "-q", "-t", tag, str(context)], capture_output=True, text=True,
                           env={**os.environ, "DOCKER_BUILDKIT": "1"})
    assert built.returncode == 0, built.stderr


def test_the_written_runtime_equals_what_buildkit_makes_of_its_rendered_dockerfile(workspace, docker_engine,
                                                                                    debian_reachable,
                                                                                    pypi_reachable, tmp_path):
    launcher = workspace / "images/demo/launch_server.sh"
    original = launcher.read_text()
    ours = "enginebuild/demo:latest"
    theirs = f"enginebuild-test/buildkit-tail:{uuid.uuid4().hex[:8]}"
    try:
        # twice into the same folder, the second time after an edit that keeps the file's size:
        # BuildKit sends a folder's files again only when their size or stamp differ
        for note in (uuid.uuid4().hex, uuid.uuid4().hex):
            launcher.write_text(original + f"# tuning note {note}\n")
            launcher.chmod(0o755)
            proc = run_cli(["image", "demo", *AMD64], workspace)
            assert proc.returncode == 0, proc.stderr
            assert "wrote" in proc.stdout
            proc = run_cli(["render", "demo", *AMD64, "--out", str(tmp_path / "r")], workspace)
            assert proc.returncode == 0, proc.stderr
            buildkit_build(tmp_path / "r/linux-amd64/runtime-tail", theirs)
            assert config(theirs) == config(ours)
            mine, buildkit = filesystem(ours), filesystem(theirs)
            assert sorted(set(mine) ^ set(buildkit)) == []
            differing = {path: (mine[path], buildkit[path]) for path in mine if mine[path] != buildkit[path]}
            assert differing == {}
            launched = mine["opt/enginebuild/bin/launch_server.sh"]
            assert launched[1] == "0o755"
            assert launched[4] == hashlib.sha256(launcher.read_bytes()).hexdigest()  # this round's edit
            # the layers below the files are the same layers, not equal copies
            assert inspect(theirs)["RootFS"]["Layers"][:-3] == inspect(ours)["RootFS"]["Layers"][:-3]
    finally:
        docker("rmi", theirs, check=False)


def test_a_build_context_rendered_again_after_a_same_size_edit_changes_stamp_only_where_bytes_changed(
        workspace, docker_engine, debian_reachable, pypi_reachable, tmp_path):
    """A rendered build context's stamps follow its bytes: rendering again with nothing changed keeps
    every stamp (BuildKit reuses what it has); a same-size edit of the engine's build script gives
    the files holding it another stamp (BuildKit sends them again) and leaves the others alone."""
    def stamps() -> dict:
        proc = run_cli(["render", "demo", *AMD64, "--out", str(tmp_path / "r")], workspace)
        assert proc.returncode == 0, proc.stderr
        folder = tmp_path / "r/linux-amd64"
        return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")
                if p.is_file() and "runtime-tail" not in p.parts}

    assert run_cli(["image", "demo", *AMD64], workspace).returncode == 0
    first = stamps()
    engine = next((tmp_path / "r/linux-amd64").glob("*-component-engine"))
    (engine / "left-by-hand.txt").write_text("an earlier render's folder is replaced whole")
    assert stamps() == first
    script = workspace / "images/demo/engine/build_engine.sh"
    script.write_text(script.read_text().replace("#!/bin/sh", "#!/bin/sh ", 1)[:-1])  # same size, other bytes
    again = stamps()
    changed = sorted(path for path in first if again.get(path) != first[path])
    # the script alone: the engine's source tree holds only its declared input (engine.c), and
    # nothing of another build moves
    assert changed == [f"{engine.name}/build.sh"]
    source = workspace / "images/demo/engine/engine.c"
    source.write_text(source.read_text().replace("int main(", "int main (", 1)[:-1])  # same size, other bytes
    again, first = stamps(), again
    assert sorted(path for path in first if again.get(path) != first[path]) == [f"{engine.name}/source.tar"]
    assert sorted(again) == sorted(first)


def test_a_change_to_a_command_goes_through_buildkit_and_a_file_edit_does_not(workspace, docker_engine,
                                                                              debian_reachable, pypi_reachable):
    assert run_cli(["image", "demo", *AMD64], workspace).returncode == 0
    spec = workspace / "images/demo/image.yaml"
    spec.write_text(spec.read_text().replace('"mkdir -p /tmp && chmod 1777 /tmp"\n\npython:',
                                             '"mkdir -p /tmp /srv && chmod 1777 /tmp"\n\npython:', 1))
    proc = run_cli(["plan", "demo", *AMD64, "--json"], workspace)
    plan = json.loads(proc.stdout)["images"][0]
    assert plan["layers_to_build"] == ["system commands"] and plan["components_to_build"] == []
    refused = run_cli(["image", "demo", *AMD64], workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert refused.returncode != 0  # a command needs the builder: with none, the build stops
    proc = run_cli(["image", "demo", *AMD64], workspace)
    assert proc.returncode == 0, proc.stderr
    assert "ran 1 command layer(s)" in proc.stdout
    assert docker("run", "--rm", "--entrypoint", "test", "enginebuild/demo:latest", "-d", "/srv").returncode == 0
    (workspace / "images/demo/wait_for_server.sh").open("a").write("# checked\n")
    proc = run_cli(["image", "demo", *AMD64], workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 0, proc.stderr
    assert "ran" not in proc.stdout and "wrote 1 layer(s)" in proc.stdout


def test_render_out_writes_its_contexts_without_an_engine(workspace, tmp_path, monkeypatch):
    """`render --out` writes Dockerfiles and contexts: nothing there needs the engine, which it
    once asked for its chain images before writing anything (and stopped where none ran)."""
    from helpers.specs import write_image

    write_image(workspace, "t", """
        base: scratch
        platform: linux/amd64
        files:
          /opt/t/hello.txt: hello.txt
        """, {"hello.txt": "hello\n"})
    assert run_cli(["lock", "t"], workspace).returncode == 0
    out = tmp_path / "rendered"
    proc = run_cli(["render", "t", "--out", str(out)], workspace,
                   env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert proc.returncode == 0, proc.stderr
    assert (out / "linux-amd64/runtime-tail/Dockerfile").is_file()
    written = [p for p in (out / "linux-amd64/runtime-tail").rglob("hello.txt")]
    assert [p.read_text() for p in written] == ["hello\n"]


def test_render_out_into_a_folder_an_earlier_render_wrote_leaves_none_of_its_folders(workspace, tmp_path,
                                                                                    debian_reachable):
    """A component's folder another image's render wrote there is removed (it named a build that
    is not this image's); what the user keeps there, unnamed by any render, stays."""
    from helpers.specs import BUSYBOX_BUILDER, write_image

    write_image(workspace, "c", BUSYBOX_BUILDER + "components:\n  e:\n    source: {path: src}\n"
                "    build: {script: build.sh}\n    outputs: {paths: [/opt/e]}\ninstall: [e]\n",
                {"src/a": "a\n", "build.sh": "#!/bin/sh\nmkdir -p /opt/e\n"})
    write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\nfiles:\n  /opt/t/hello.txt: hello.txt\n",
                {"hello.txt": "hello\n"})
    for name in ("c", "t"):
        assert run_cli(["lock", name], workspace).returncode == 0
    out = tmp_path / "rendered"
    assert run_cli(["render", "c", "--out", str(out)], workspace).returncode == 0
    assert (out / "linux-amd64/01-component-e/Dockerfile").is_file()
    (out / "linux-amd64/notes").mkdir()
    proc = run_cli(["render", "t", "--out", str(out)], workspace)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (out / "linux-amd64").iterdir()) == [".enginebuild-rendered", "notes", "runtime-tail"]
    assert [p.read_text() for p in (out / "linux-amd64/runtime-tail").rglob("hello.txt")] == ["hello\n"]
