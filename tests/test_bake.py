"""`render IMAGE --bake DIR`: the image as a build plain `docker buildx bake` runs without
enginebuild. Checked by structure against the plan, and built for real with a pinned buildx
(scripts/setup.sh unpacks it aside) into an image whose files and settings equal enginebuild's."""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, need
from helpers.docker import docker, inspect
from helpers.inprocess import run_in_process
from helpers.specs import BUSYBOX_BUILDER, write_image

pytestmark = [pytest.mark.docker, pytest.mark.network]

BUILDX = Path("/opt/enginebuild-buildx/usr/libexec/docker/cli-plugins/docker-buildx")


@pytest.fixture(scope="module")
def recipes(tmp_path_factory) -> Path:
    """A private copy of the recipe repository (so that building here leaves this checkout's
    no-op memo to the tests that build it)."""
    root = tmp_path_factory.mktemp("bake-repo")
    for name in ("images", "patches", "lockfiles"):
        shutil.copytree(ROOT / name, root / name, symlinks=True)
    return root


@pytest.fixture(scope="module")
def baked(recipes, tmp_path_factory, docker_engine, debian_reachable, pypi_reachable) -> Path:
    """The demo as committed, built by enginebuild, then written out for bake."""
    assert run_in_process(["image", "demo"], recipes).returncode == 0
    folder = tmp_path_factory.mktemp("bake") / "out"
    proc = run_in_process(["render", "demo", "--bake", str(folder)], recipes)
    assert proc.returncode == 0, proc.stderr
    return folder


@pytest.fixture
def plans(recipes) -> dict:
    proc = run_in_process(["plan", "demo", "--json"], recipes)
    assert proc.returncode == 0, proc.stderr
    return {doc["platform"]: doc for doc in json.loads(proc.stdout)["images"]}


def stages(dockerfile: str) -> dict[str, list[str]]:
    """Each stage's instructions, by stage name."""
    out: dict[str, list[str]] = {}
    current = None
    for line in dockerfile.splitlines():
        match = re.match(r"FROM \S+ AS (\S+)$", line)
        if match:
            current = match.group(1)
            out[current] = []
        elif current and line and not line.startswith("#"):
            out[current].append(line)
    return out


def test_the_bake_file_and_its_dockerfiles_match_the_plan(baked, plans):
    hcl = (baked / "docker-bake.hcl").read_text()
    for platform, plan in plans.items():
        folder = baked / platform.replace("/", "-")
        name = f"demo-{folder.name}"
        assert f'target "{name}" {{' in hcl and f'tags = ["{plan["tag"]}"]' in hcl
        dockerfile = (folder / "Dockerfile").read_text()
        assert "enginebuild/chain" not in dockerfile  # nothing that exists only in enginebuild's engine
        found = stages(dockerfile)
        for comp in plan["components"]:
            assert f'target "{name}-{comp["name"]}" {{' in hcl
            body = found[f"component-{comp['name']}"]
            # what it needs, copied from those components' stages; nothing else
            assert sorted({m.group(1) for line in body if (m := re.match(r"COPY --from=component-(\S+) ", line))}) \
                == sorted(comp["needs"])
        runtime = found["runtime"]
        copied = list(dict.fromkeys(re.match(r"COPY --from=component-(\S+) ", line).group(1)  # type: ignore[union-attr]
                                    for line in runtime if line.startswith("COPY --from=")))  # a line per path
        outputs = [layer["name"].split()[2] for layer in plan["layers"] if layer["kind"] == "output"]
        assert copied == outputs
        # every file a build reads is in the folder
        for line in dockerfile.splitlines():
            for path in re.findall(r"source=([^,\s]+)", line) + re.findall(r"^(?:ADD|COPY) (?!--)(\S+) ", line):
                assert (folder / path).exists(), (line, path)
        assert len(re.findall(r"^ADD layers/", "\n".join(runtime), re.M)) == \
            sum(1 for layer in plan["layers"] if layer["kind"] in ("system", "wheel", "bytecode", "manifest", "files")) - 1


def listing(image: str) -> dict[str, tuple]:
    """Every entry of an image's filesystem: type, mode, owner, size, link (not times)."""
    container = docker("create", image, "/nothing").stdout.strip()
    try:
        data = subprocess.run(["docker", "export", container], capture_output=True, check=True).stdout
    finally:
        docker("rm", container)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name.rstrip("/"): (m.type, m.mode, m.uid, m.gid, m.size if m.isfile() else 0, m.linkname)
                for m in tar if m.name not in (".dockerenv",) and not m.name.startswith(("dev/", "proc/", "sys/", "etc/hosts",
                                                                                          "etc/hostname", "etc/resolv.conf"))}


def test_plain_buildx_bake_builds_the_image_enginebuild_builds(baked):
    need(os.access(BUILDX, os.X_OK), f"docker buildx is not at {BUILDX} (scripts/setup.sh unpacks it)")
    tag = f"enginebuild-test/baked-demo:{uuid.uuid4().hex[:8]}"
    proc = subprocess.run([str(BUILDX), "bake", "-f", str(baked / "docker-bake.hcl"), "demo-linux-amd64",
                           "--set", f"demo-linux-amd64.tags={tag}"], capture_output=True, text=True, cwd=baked)
    assert proc.returncode == 0, proc.stderr[-4000:]
    try:
        ours, theirs = listing("enginebuild/demo:latest-amd64"), listing(tag)
        assert sorted(set(ours) ^ set(theirs)) == []
        assert {k: v for k, v in ours.items() if theirs[k] != v} == {}
        mine, baked_config = inspect("enginebuild/demo:latest-amd64")["Config"], inspect(tag)["Config"]
        assert sorted(baked_config["Env"]) == sorted(mine["Env"])  # the same variables (Docker puts PATH first)
        for key in ("Entrypoint", "Cmd", "ExposedPorts", "Labels", "StopSignal", "Healthcheck", "User"):
            assert baked_config.get(key) == mine.get(key), key
        assert (baked_config.get("WorkingDir") or "/") == (mine.get("WorkingDir") or "/")  # BuildKit writes "/"
        out = docker("run", "--rm", "--entrypoint", "demo-engine-settings", tag).stdout
        assert "DRAFTER_LAYER_IDS" in out and "1,16,31,46,61" in out
    finally:
        docker("rmi", "-f", tag, check=False)


def test_a_layer_that_deletes_files_cannot_be_an_add(tmp_path):
    from enginebuild.usecases.baking import deletes_files

    path = tmp_path / "layer.tar"
    with tarfile.open(path, "w") as tar:
        for name in ("usr/lib/python3/dist-packages/six-1.17.0.dist-info/METADATA",
                     "usr/lib/python3/dist-packages/.wh.six-1.16.0.dist-info"):
            tar.addfile(tarfile.TarInfo(name), io.BytesIO(b""))
    assert deletes_files(path)
    with tarfile.open(path, "w") as tar:
        tar.addfile(tarfile.TarInfo("usr/bin/tool"), io.BytesIO(b""))
    assert not deletes_files(path)


SHARED = BUSYBOX_BUILDER + """system:
  install: extract
  packages: [busybox-static]
  run: [["/bin/busybox", "--install", "-s", "/bin"]]
components:
  e:
    source: {path: src}
    build: {script: build.sh}
    outputs: {paths: [/opt/e]}
install: [e]
"""


def test_a_layer_the_builder_and_runtime_share_is_written_once_as_a_copy_and_the_folder_whole(
        workspace, tmp_path, docker_engine, debian_reachable):
    write_image(workspace, "shared", SHARED, {"src/x": "x\n", "build.sh": "#!/bin/sh\nmkdir -p /opt/e && echo e > /opt/e/x\n"})
    assert run_in_process(["image", "shared"], workspace).returncode == 0
    folder = tmp_path / "bake"
    proc = run_in_process(["render", "shared", "--bake", str(folder)], workspace)
    assert proc.returncode == 0, proc.stderr
    layers = sorted((folder / "linux-amd64/layers").iterdir())
    assert layers and all(p.stat().st_nlink == 1 for p in layers)  # copies: editing one leaves the store whole
    dockerfile = (folder / "linux-amd64/Dockerfile").read_text()
    shared = [p for p in layers if dockerfile.count(f"ADD layers/{p.name} /") == 2]  # the builder's and the runtime's
    assert len(shared) == 1, dockerfile
    shared[0].write_bytes(b"edited")
    again = run_in_process(["render", "shared", "--bake", str(folder)], workspace)  # an earlier bake is replaced whole
    assert again.returncode == 0, again.stderr
    assert (folder / "linux-amd64/layers" / shared[0].name).read_bytes() != b"edited"
    assert not list(tmp_path.glob(".*"))
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    refused = run_in_process(["render", "shared", "--bake", str(other)], workspace)
    assert refused.returncode == 2 and "holds files that are not an earlier bake" in refused.stderr, refused.stderr
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]
    for flag in ("--bake", "--out"):
        proc = run_in_process(["render", "shared", flag, str(other / "notes.txt")], workspace)
        assert proc.returncode == 2 and f"render {flag} {other / 'notes.txt'}: is not a folder" in proc.stderr
