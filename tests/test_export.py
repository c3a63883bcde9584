"""`image --output DIR` writes the image's own filesystem, as its layers stack it, and nothing of
the host: hard links name files inside DIR, modes (setuid, the sticky bit) and owners are kept,
a hard link to a file the layer clean-up drops (/tmp) still holds its bytes, and a container's
traces (/.dockerenv, /etc/hosts, mount points) are not there."""
from __future__ import annotations

import io
import json
import os
import shutil
import stat
import tarfile
import uuid
from pathlib import Path

import pytest

from conftest import run_cli
from helpers.docker import docker
from helpers.specs import write_image

pytestmark = [pytest.mark.docker, pytest.mark.network]


def shapes_spec(probe: str) -> str:
    lines = [
        f"mkdir -p /opt/{probe} /tmp && chmod 1777 /tmp",
        f"echo image-bytes > /opt/{probe}/file && ln /opt/{probe}/file /opt/{probe}/link",
        f"echo suid > /opt/{probe}/suid && chmod 4755 /opt/{probe}/suid",
        f"echo open > /opt/{probe}/open && chmod 0666 /opt/{probe}/open",
        f"echo owned > /opt/{probe}/owned && chown 65534:65534 /opt/{probe}/owned",
        f"echo from-tmp > /tmp/scratch-{probe} && ln /tmp/scratch-{probe} /opt/{probe}/from-tmp",
        f"ln -s /opt/{probe}/file /opt/{probe}/symlink",
    ]
    return "\n".join([
        "base: scratch", "platform: linux/amd64",
        "system:", "  install: extract", "  packages: [busybox-static]",
        '  run: [["/bin/busybox", "--install", "-s", "/bin"]]',
        "steps:", "  - name: shapes", f"    run: {json.dumps(' && '.join(lines))}", ""])


def image_paths(tag: str) -> set[str]:
    """Every path the image's layers leave (whiteouts applied), from `docker save`."""
    import subprocess

    saved = subprocess.run(["docker", "save", tag], capture_output=True, check=True).stdout
    paths: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(saved)) as outer:
        order = json.loads(outer.extractfile("manifest.json").read())[0]["Layers"]
        for name in order:
            with tarfile.open(fileobj=outer.extractfile(name)) as layer:
                for entry in layer.getmembers():
                    path = entry.name.strip("./").strip("/")
                    base = path.rsplit("/", 1)[-1]
                    if base.startswith(".wh."):
                        gone = path[: -len(base)] + base[4:]
                        paths = {p for p in paths if p != gone and not p.startswith(gone + "/")}
                    elif path and not (entry.isdev() or entry.isfifo()):
                        parts = path.split("/")
                        paths.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))  # and its folders
    return paths


def tree_paths(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def host_file():
    """A file of the host at the path the image has its hard link's target: it must not change."""
    probe = "eb-export-" + uuid.uuid4().hex[:8]
    folder = Path("/opt") / probe
    folder.mkdir(parents=True)
    (folder / "file").write_bytes(b"host-bytes\n")
    os.chmod(folder / "file", 0o600)
    os.chown(folder / "file", 65534, 65534)
    os.utime(folder / "file", (1577836800, 1577836800))
    yield probe, folder / "file"
    shutil.rmtree(folder)


def test_output_writes_the_images_own_files_and_never_touches_the_hosts(workspace, docker_engine, debian_reachable,
                                                                        host_file, tmp_path):
    probe, host = host_file
    name = f"shapes-{probe[-8:]}"
    write_image(workspace, name, shapes_spec(probe))
    assert run_cli(["lock", name], workspace).returncode == 0
    out = tmp_path / "rootfs"
    proc = run_cli(["image", name, "--output", str(out)], workspace)
    assert proc.returncode == 0, proc.stderr  # a hard link to a file under /tmp loads and exports
    # the host's file is as it was: bytes, mode, owner and time
    before = host.stat()
    assert host.read_bytes() == b"host-bytes\n"
    assert (stat.S_IMODE(before.st_mode), before.st_uid, int(before.st_mtime)) == (0o600, 65534, 1577836800)
    assert before.st_nlink == 1
    # the folder holds the image's bytes, its hard link inside the folder
    opt = out / "opt" / probe
    assert (opt / "file").read_bytes() == b"image-bytes\n" == (opt / "link").read_bytes()
    assert (opt / "file").stat().st_ino == (opt / "link").stat().st_ino
    assert (opt / "from-tmp").read_bytes() == b"from-tmp\n"
    assert os.readlink(opt / "symlink") == f"/opt/{probe}/file"  # kept as written, not followed
    # modes and owners as the image has them
    assert stat.S_IMODE((opt / "suid").stat().st_mode) == 0o4755
    assert stat.S_IMODE((opt / "open").stat().st_mode) == 0o666
    assert stat.S_IMODE((out / "tmp").stat().st_mode) == 0o1777
    assert ((opt / "owned").stat().st_uid, (opt / "owned").stat().st_gid) == (65534, 65534)
    # exactly the image's files: no trace of a container
    for trace in (".dockerenv", "etc/hosts", "etc/hostname", "etc/resolv.conf", "etc/mtab"):
        assert not os.path.lexists(out / trace), trace
    assert tree_paths(out) == image_paths(f"enginebuild/{name}:latest")
    assert not list(tmp_path.glob(".*"))  # no staging or spool folder left beside it
    # verify of an image that declares no cuda-archs: its runtime closure is checked, its kernels are not
    verify = run_cli(["verify", name], workspace)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "runtime closure ok" in verify.stdout and f"{name}: declares no cuda-archs: kernels not checked" in \
        verify.stdout
    doc = json.loads(run_cli(["verify", name, "--json"], workspace).stdout)
    assert doc["ok"] and doc["images"] == [] and doc["not_declared"] == [name] and doc["runtime"][0]["ok"]
    docker("image", "rm", f"enginebuild/{name}:latest", check=False)


def test_output_through_a_dangling_symlink_is_refused(workspace, tmp_path):
    write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\nfiles:\n  /a.txt: a.txt\n", {"a.txt": "a\n"})
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "elsewhere")
    proc = run_cli(["image", "t", "--output", str(link)], workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 2 and f"--output {link}: is a symbolic link" in proc.stderr, proc.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_output_folders_inside_one_another_are_refused_before_anything_is_built(workspace, tmp_path):
    """The runtime's folder holds what the image puts there, links included: a component's folder
    inside it would be written through them."""
    write_image(workspace, "t", "base: scratch\nplatform: linux/amd64\nfiles:\n  /a.txt: a.txt\n", {"a.txt": "a\n"})
    root = tmp_path / "rootfs"
    proc = run_cli(["image", "t", "--output", str(root), "--output", f"e={root}/lib/x"], workspace,
                   env={"ENGINEBUILD_DOCKER": "/bin/false", "DOCKER_HOST": "unix:///nonexistent.sock"})
    assert proc.returncode == 2, proc.stderr
    assert f"--output {root}/lib/x: is inside --output {root}" in proc.stderr
    assert not root.exists()
    # the same through a link on the host: compared where they lead, not as text
    via = tmp_path / "via"
    via.symlink_to(root)
    proc = run_cli(["image", "t", "--output", str(root), "--output", f"e={via}/lib/x"], workspace,
                   env={"ENGINEBUILD_DOCKER": "/bin/false", "DOCKER_HOST": "unix:///nonexistent.sock"})
    assert proc.returncode == 2 and f"--output {via}/lib/x: is inside --output {root}" in proc.stderr, proc.stderr
    assert not root.exists()


def test_a_component_output_named_like_a_whiteout_fails_the_build_and_deletes_nothing(workspace, docker_engine,
                                                                                       debian_reachable, tmp_path):
    from helpers.specs import BUSYBOX_BUILDER

    spec = BUSYBOX_BUILDER + ("components:\n  e:\n    source: {path: src}\n    build: {script: build.sh}\n"
                              "    outputs: {prefix: /out}\ninstall: [e]\n")
    marker = uuid.uuid4().hex[:12]
    write_image(workspace, "wh", spec, {"src/a": marker, "build.sh": "#!/bin/sh\nset -e\nmkdir -p /out\n"
                                        "echo ok > /out/ok\n: > '/out/.wh...'\n"})
    assert run_cli(["lock", "wh"], workspace).returncode == 0
    (tmp_path / "users-file").write_text("keep me")
    proc = run_cli(["image", "wh", "--output", f"e={tmp_path / 'out'}"], workspace)
    assert proc.returncode == 1, proc.stderr
    assert "component e: its output /out holds '.wh...': a name starting with .wh. is how a layer deletes" \
        in proc.stderr, proc.stderr
    assert (tmp_path / "users-file").read_text() == "keep me" and not (tmp_path / "out").exists()
