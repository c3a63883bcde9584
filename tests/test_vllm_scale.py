"""The catalogue's vLLM image at real scale (`vllm-pypi`): vLLM's release wheels with their whole
closure (PyTorch, NVIDIA's CUDA libraries: about 200 distributions, 4 GiB of wheels), built
for linux/amd64 in a store of its own, imported and checked in the container; everything it
wrote (store, images, chain tags) is removed afterwards."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, need_free_disk, run_cli
from helpers.docker import assert_pip_check_clean, docker

pytestmark = [pytest.mark.network]
IMAGE = "vllm-pypi"


def test_the_vllm_closure_is_over_150_distributions_in_under_100_layers_on_both_platforms():
    lock = json.loads((ROOT / f"lockfiles/{IMAGE}.lock").read_text())
    proc = run_cli(["plan", IMAGE, "--json"], ROOT)
    assert proc.returncode == 0, proc.stderr
    for doc in json.loads(proc.stdout)["images"]:
        packages = lock["inputs"][f"runtime.python@{doc['platform']}"]["resolved"]["packages"]
        assert len(packages) >= 150 and {"vllm", "torch", "nvidia-cublas"} <= {p["name"] for p in packages}
        names = [row["name"] for row in doc["layers"]]
        assert len(names) <= 100, doc["platform"]
        for big in ("vllm", "torch", "nvidia-cublas", "triton"):  # each alone: a bump moves only its bytes
            assert any(n.startswith(f"python {big} ") and "," not in n for n in names), (big, names)


def _chain_tags() -> set[str]:
    return set(docker("images", "enginebuild/chain", "--format", "{{.Repository}}:{{.Tag}}").stdout.split())


def test_the_vllm_image_builds_imports_and_its_closure_is_consistent(tmp_path, docker_engine, pypi_reachable,
                                                                     debian_reachable):
    home = tmp_path / "home"  # its own store: 4 GiB of wheels and their layers, removed below
    # the store holds about 13 GB at its peak (bench o's warm store: wheels and layers) and the engine the
    # image's 9.5 GB and the load's temporary copy; a run with about 23 GB free on one disk failed mid-build
    need_free_disk(tmp_path, 14, "the vllm-pypi build's store")
    root = docker("info", "--format", "{{.DockerRootDir}}").stdout.strip()
    need_free_disk(Path(root), 30 if Path(root).stat().st_dev == tmp_path.stat().st_dev else 18,
                   "the vllm-pypi build's store and engine")
    chains = _chain_tags()
    tag = f"enginebuild/{IMAGE}:latest"
    try:
        proc = run_cli(["image", IMAGE, "--platform", "linux/amd64"], ROOT, env={"ENGINEBUILD_HOME": str(home)})
        assert proc.returncode == 0, proc.stderr
        said = proc.stdout + proc.stderr
        assert "kernels: vllm-pypi (linux/amd64): ok" in said
        # every top-level module of the closure (vllm and torch among them) imported in the image
        assert "python: vllm-pypi (linux/amd64): imports ok" in said, said[-3000:]
        layers = json.loads(docker("image", "inspect", tag, "--format", "{{json .RootFS.Layers}}").stdout)
        assert len(layers) <= 100
        lock = json.loads((ROOT / f"lockfiles/{IMAGE}.lock").read_text())
        versions = {p["name"]: p["version"] for p in lock["inputs"]["runtime.python@linux/amd64"]["resolved"]["packages"]}
        # the CLI builds its whole parser, which needs a platform, before it prints its version:
        # with no GPU here, vLLM is told to take the CPU's
        out = docker("run", "--rm", "-e", "VLLM_TARGET_DEVICE=cpu", "--entrypoint", "vllm", tag, "--version",
                     check=False)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.strip().splitlines()[-1] == versions["vllm"]
        # the installed torch is the locked one; of the two distributions that install
        # cuda/bindings/, the one pip leaves is cuda-bindings (torch asks for it), not cuda-python
        # 12.6's older extensions
        code = "import importlib.metadata as m, cuda.bindings; print(m.version('torch'), cuda.bindings.__version__)"
        out = docker("run", "--rm", "--entrypoint", "python3", tag, "-c", code, check=False)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.split()[-2:] == [versions["torch"], versions["cuda-bindings"]], out.stdout
        assert_pip_check_clean(tag, "--entrypoint", "python3")
        verify = run_cli(["verify", IMAGE, "--platform", "linux/amd64", "--json"], ROOT,
                         env={"ENGINEBUILD_HOME": str(home)})
        assert verify.returncode == 0, verify.stdout + verify.stderr
        assert "_moe_C" in verify.stdout and "sm_120" in verify.stdout  # the device code the wheels carry
        # the imports the build checked for this image ID are not run again
        assert json.loads(verify.stdout)["imports"][0]["recorded"], verify.stdout[-3000:]
    finally:
        docker("rmi", "-f", tag, f"enginebuild/{IMAGE}:latest-amd64", check=False)
        for ref in _chain_tags() - chains:
            docker("rmi", ref, check=False)
        shutil.rmtree(home, ignore_errors=True)
        assert not os.path.exists(home)
