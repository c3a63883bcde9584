"""The catalogue's vLLM image at real scale (`vllm-pypi`): vLLM's release wheels with their whole
closure (PyTorch, NVIDIA's CUDA libraries: about 200 distributions, 4 GiB of wheels), built
for linux/amd64 in a store of its own, imported and checked in the container; everything it
wrote (store, images, chain tags) is removed afterwards."""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, need_free_disk, run_cli
from helpers.docker import assert_pip_check_clean, docker, enginebuild_tags, remove_new_tags

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


@pytest.fixture(scope="module")
def built(tmp_path_factory, docker_engine, pypi_reachable, debian_reachable):
    """The image, built once for the tests below; everything it wrote removed after them."""
    tmp_path = tmp_path_factory.mktemp("vllm-scale")
    home = tmp_path / "home"  # its own store: 4 GiB of wheels and their layers, removed below
    # the store holds about 13 GB at its peak (bench o's warm store: wheels and layers) and the engine the
    # image's 9.5 GB and the load's temporary copy; a run with about 23 GB free on one disk failed mid-build
    need_free_disk(tmp_path, 14, "the vllm-pypi build's store")
    root = docker("info", "--format", "{{.DockerRootDir}}").stdout.strip()
    need_free_disk(Path(root), 30 if Path(root).stat().st_dev == tmp_path.stat().st_dev else 18,
                   "the vllm-pypi build's store and engine")
    chains = enginebuild_tags()
    tag = f"enginebuild/{IMAGE}:latest"
    try:
        proc = run_cli(["image", IMAGE, "--platform", "linux/amd64"], ROOT, env={"ENGINEBUILD_HOME": str(home)})
        assert proc.returncode == 0, proc.stderr
        yield tag, home, proc.stdout + proc.stderr
    finally:
        remove_new_tags(chains, home, tag, f"enginebuild/{IMAGE}:latest-amd64")
        shutil.rmtree(home, ignore_errors=True)
        assert not os.path.exists(home)


def test_the_vllm_image_builds_imports_and_its_closure_is_consistent(built):
    tag, home, said = built
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
    # whether `serve --backend ray` can be taken: the closure has no Ray
    assert any("Ray is not in the closure" in line for line in json.loads(verify.stdout)["serving"]), verify.stdout[-500:]


# vLLM's launch across two nodes, without a GPU: two network namespaces with their own address on one
# bridge (each held by a container; the node's containers join it, as a Spark's join the host's)
PARSE = """
import json, sys
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
from vllm.entrypoints.cli.serve import ServeSubcommand
parser = FlexibleArgumentParser(prog="vllm")
ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
parsed = [parser.parse_args(argv[1:]) for argv in json.loads(sys.argv[1])]
print(json.dumps([{k: getattr(args, k, None) for k in ("model_tag", "nnodes", "node_rank", "master_addr", "master_port",
                                                       "headless", "tensor_parallel_size", "pipeline_parallel_size",
                                                       "distributed_executor_backend")} for args in parsed]))
"""


def test_two_nodes_meet_over_gloo_with_the_launchers_environment_and_vllm_parses_each_command(built, tmp_path):
    from helpers.engines import worker_number
    from helpers.fabric import fabric_network

    tag = built[0]
    prefix = f"10.{110 + worker_number()}.{uuid.uuid4().int % 200 + 20}"
    model = tmp_path / "models" / "tiny-llama"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    model.parent.chmod(0o755)
    (tmp_path / "images").mkdir()
    with fabric_network(prefix) as net:
        holders = {"head": (f"{net}-a", f"{prefix}.2"), "worker": (f"{net}-b", f"{prefix}.3")}
        (tmp_path / "enginebuild.yaml").write_text("nodes:\n" + "".join(
            f'  - {{name: {n}, address: {a}, network: "container:{h}"}}\n' for n, (h, a) in holders.items()))
        try:
            for holder, address in holders.values():
                docker("run", "-d", "--name", holder, "--network", net, "--ip", address, "--entrypoint",
                       "/bin/sleep", tag, "86400")
            check_two_nodes(tag, model, tmp_path, prefix)
        finally:
            for holder, _ in holders.values():
                docker("rm", "-f", holder, check=False)


def check_two_nodes(tag: str, model, tmp_path, prefix: str) -> None:
    checked = run_cli(["serve", "check", tag, "--gpus", "none", "--model", str(model), "--json",
                       "-e", "VLLM_TARGET_DEVICE=cpu"], tmp_path, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    doc = json.loads(checked.stdout)
    assert (doc["family"], doc["tensor_parallel"], doc["pipeline_parallel"]) == ("vllm", 2, 1)
    commands = []
    for node in doc["nodes"]:
        # the rendezvous ran over the interface the launcher derived, with the head's address and port
        assert node["env"]["GLOO_SOCKET_IFNAME"] == "eth0" and node["env"]["MASTER_ADDR"] == f"{prefix}.2"
        assert "rendezvous: world size 2, all-reduce sum 3 (Gloo over eth0)" in node["said"], node["said"]
        commands.append(json.loads(next(s for s in node["said"] if s.startswith("command: "))[len("command: "):]))
        assert commands[-1][:3] == ["vllm", "serve", "/models/tiny-llama"], commands[-1]
    # each node's command, parsed by vLLM's own `serve` parser (one container: vLLM imports once)
    parsed = docker("run", "--rm", "-e", "VLLM_TARGET_DEVICE=cpu", "--entrypoint", "python3", tag, "-c",
                    PARSE, json.dumps(commands), check=False)
    assert parsed.returncode == 0, parsed.stderr[-3000:]
    for rank, args in enumerate(json.loads(parsed.stdout.strip().splitlines()[-1])):
        assert (args["nnodes"], args["node_rank"], args["master_addr"], args["master_port"]) == \
            (2, rank, f"{prefix}.2", 29500), args
        assert bool(args["headless"]) == (rank == 1) and args["tensor_parallel_size"] == 2, args
    assert docker("ps", "-a", "--filter", "label=org.enginebuild.serve", "--format", "{{.Names}}").stdout == ""
    # Ray asked of an image without it: named before anything starts
    ray = run_cli(["serve", "up", tag, "--gpus", "none", "--model", str(model), "--backend", "ray"], tmp_path,
                  timeout=60)
    assert ray.returncode == 1 and "the Ray backend was asked for, but the image has no Ray" in ray.stderr, \
        ray.stderr
    assert docker("ps", "-a", "--filter", "label=org.enginebuild.serve", "--format", "{{.Names}}").stdout == ""
