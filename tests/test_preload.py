"""A cold build loads the layers it has made into the engine while it still writes the others:
held at the writing of its last layer (a named fault point), the engine already has the image's
earlier layers as a chain image, and the final load adds only the rest. A prefix whose new layers
are small is not loaded ahead (a load costs the engine's round trips whatever its size): the
small last layer goes with the image's own load. Real parts: the Docker engine, enginebuild as a
process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT, run_cli
from helpers.docker import docker
from helpers.specs import write_image

pytestmark = [pytest.mark.docker]


def chain_images() -> dict[str, list[str]]:
    """Each chain image in the engine: its ID and its layers' diff IDs."""
    ids = docker("image", "ls", "enginebuild/chain", "--format", "{{.ID}}").stdout.split()
    if not ids:
        return {}
    found = json.loads(docker("image", "inspect", *sorted(set(ids))).stdout)
    return {image["Id"]: image["RootFS"].get("Layers", []) for image in found}


def test_the_layers_made_first_are_in_the_engine_while_the_last_is_still_being_written(workspace, eb_home,
                                                                                     docker_engine):
    name = f"pre-{uuid.uuid4().hex[:6]}"
    # new bytes (no engine has these layers); a and b together over the 32 MiB a prefix loaded
    # ahead must add (execution/preload.py), c small
    texts = {f"{n}.txt": uuid.uuid4().hex + ("\n" + "x" * 1023) * (17 << 10 if n != "c" else 0) for n in "abc"}
    write_image(workspace, name, "base: scratch\nplatform: linux/amd64\nmanifest: label\nfiles:\n"
                + "".join(f"  /opt/{n}: {n}\n" for n in texts), texts)
    assert run_cli(["lock", name], workspace).returncode == 0
    held = eb_home / "faults" / "tar.entry"
    held.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), ENGINEBUILD_FAULT="tar.entry:/opt/c.txt=wait")
    before = chain_images()
    proc = subprocess.Popen([sys.executable, "-m", "enginebuild", "image", name, "--jobs", "4"], cwd=workspace,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        loaded: list[str] = []
        while not loaded:  # the state: c.txt's layer is being written, a and b are loaded already
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the engine never had the first two layers"
            if held.exists():
                loaded = [i for i, layers in chain_images().items() if i not in before and len(layers) == 2]
            time.sleep(0.1)
        assert held.exists()  # still held: these were loaded before the last layer was written
        held.unlink()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    # the last one, small, went with the image's own load: one load for it, not a second
    assert "wrote 3 layer(s) (2 loaded into the engine before the image)" in out, out
    image = json.loads(docker("image", "inspect", f"enginebuild/{name}:latest").stdout)[0]
    assert image["RootFS"]["Layers"][:2] == chain_images()[loaded[0]]  # the image is built on them
    # the chain image of all three, which the image's own load took the chain tag from, is gone:
    # left untagged it would keep the layers after the image is removed
    untagged = docker("images", "--filter", "dangling=true", "--format", "{{.ID}}").stdout.split()
    for found in json.loads(docker("image", "inspect", *untagged).stdout) if untagged else []:
        assert found["RootFS"].get("Layers") != image["RootFS"]["Layers"], found["Id"]
    saved = docker("create", f"enginebuild/{name}:latest", "x").stdout.strip()
    try:
        for file, text in texts.items():
            copied = subprocess.run(["docker", "cp", f"{saved}:/opt/{file}", "-"], capture_output=True, check=True)
            assert text[:32].encode() in copied.stdout and len(copied.stdout) > len(text)
    finally:
        docker("rm", "-f", saved, check=False)
        docker("rmi", "-f", f"enginebuild/{name}:latest", check=False)
