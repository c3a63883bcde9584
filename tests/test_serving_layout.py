"""Serving across nodes, the parts that need no engine: what a node reads of itself (its
interfaces from the kernel, its RDMA device and RoCE v2 GID index from a sysfs tree), the plan
laid out from the nodes' facts (roles, parallel sizes, the communication environment per host),
the preflight's findings named per node, and the nodes given in enginebuild.yaml or on the
command line checked with the file, line and key of a mistake."""
from __future__ import annotations

import socket

import pytest

from enginebuild.errors import UserError
from enginebuild.serving import nodeside
from enginebuild.serving.layout import Options, checked_facts, layout
from enginebuild.serving.nodes import Node, check_nodes, parse_node
from helpers.inprocess import run_in_process


def facts(address: str, iface: str = "enp1s0f1np1", *, gpus: int = 1, vllm: bool = True, ray: bool = False,
          rpc: bool = True, up: bool = True, roce: dict | None = None) -> dict:
    return {"interfaces": {"lo": {"addresses": ["127.0.0.1"], "up": True},
                           iface: {"addresses": [address], "up": up}},
            "interface": iface, "up": up, "roce": roce, "gpus": gpus,
            "modules": {"vllm": vllm, "torch": vllm, "ray": ray},
            "tools": {"vllm": vllm, "llama-server": not vllm, "rpc-server": rpc, "ray": ray}}


NODES = [Node("spark1", "192.168.100.10"), Node("spark2", "192.168.100.11")]
LAUNCHER = ["/opt/enginebuild/bin/launch_server.sh"]


def test_a_node_finds_the_interface_holding_an_address_from_the_kernel():
    found = nodeside.interfaces()
    assert "127.0.0.1" in found["lo"]["addresses"] and found["lo"]["up"]
    said = nodeside.facts("127.0.0.1")
    assert said["interface"] == "lo" and said["up"] is True
    assert nodeside.facts("192.0.2.77")["interface"] is None  # TEST-NET-1: on no interface here
    assert socket.if_nametoindex("lo") >= 1


def _sysfs(root, iface="enp1s0f1np1", hca="rocep1s0f1", gids=()):
    (root / "class/net" / iface / "device/infiniband" / hca).mkdir(parents=True)
    port = root / "class/infiniband" / hca / "ports/1"
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (port / sub).mkdir(parents=True)
    for index, (gid, kind, ndev) in enumerate(gids):
        (port / "gids" / str(index)).write_text(gid + "\n")
        (port / "gid_attrs/types" / str(index)).write_text(kind + "\n")
        (port / "gid_attrs/ndevs" / str(index)).write_text(ndev + "\n")


def test_the_roce_v2_gid_index_is_the_one_of_this_address_and_interface(tmp_path):
    # a Spark's port: link-local GIDs (v1, v2), then the IPv4-mapped address as RoCE v1 and v2; the
    # index differs between nodes whose ports carry other addresses first, so it is read per node
    _sysfs(tmp_path, gids=[("fe80:0000:0000:0000:0000:00ff:fe00:0001", "IB/RoCE v1", "enp1s0f1np1"),
                           ("fe80:0000:0000:0000:0000:00ff:fe00:0001", "RoCE v2", "enp1s0f1np1"),
                           ("0000:0000:0000:0000:0000:ffff:c0a8:6409", "RoCE v2", "enp1s0f1np1"),  # .100.9: another
                           ("0000:0000:0000:0000:0000:ffff:c0a8:640a", "IB/RoCE v1", "enp1s0f1np1"),
                           ("0000:0000:0000:0000:0000:ffff:c0a8:640a", "RoCE v2", "enp1s0f1np1")])
    assert nodeside.roce("enp1s0f1np1", "192.168.100.10", str(tmp_path)) == \
        {"hca": "rocep1s0f1", "port": 1, "gid_index": 4}
    # no RoCE v2 GID for the address: the device is named, the index left to NCCL
    assert nodeside.roce("enp1s0f1np1", "192.168.100.12", str(tmp_path))["gid_index"] is None
    assert nodeside.roce("eth0", "192.168.100.10", str(tmp_path)) is None  # no RDMA device on that interface


def test_vllm_over_two_nodes_is_tensor_parallel_over_both_with_each_hosts_interface():
    found = [facts("192.168.100.10", roce={"hca": "rocep1s0f1", "port": 1, "gid_index": 3}),
             facts("192.168.100.11", iface="enP2p1s0f1np1", roce={"hca": "roceP2p1s0f1", "port": 1, "gid_index": 1})]
    plan = layout(NODES, found, Options(), LAUNCHER)
    assert plan.problems == () and plan.family == "vllm"
    assert (plan.tensor_parallel, plan.pipeline_parallel) == (2, 1)
    head, worker = plan.nodes
    assert head.env["NCCL_SOCKET_IFNAME"] == "enp1s0f1np1" and worker.env["NCCL_SOCKET_IFNAME"] == "enP2p1s0f1np1"
    assert worker.env["GLOO_SOCKET_IFNAME"] == worker.env["UCX_NET_DEVICES"] == "enP2p1s0f1np1"
    assert (head.env["NCCL_IB_HCA"], head.env["NCCL_IB_GID_INDEX"]) == ("rocep1s0f1:1", "3")
    assert (worker.env["NCCL_IB_HCA"], worker.env["NCCL_IB_GID_INDEX"]) == ("roceP2p1s0f1:1", "1")
    assert head.devices == ("/dev/infiniband",)
    for rank, node in enumerate(plan.nodes):
        assert node.env["NODE_RANK"] == str(rank) and node.env["MASTER_ADDR"] == "192.168.100.10"
        assert node.env["VLLM_HOST_IP"] == NODES[rank].address and node.env["DISTRIBUTED_BACKEND"] == "mp"
        assert node.join["rendezvous"] is True and node.join["nnodes"] == 2
    piped = layout(NODES, found, Options(pipeline=True), LAUNCHER)
    assert (piped.tensor_parallel, piped.pipeline_parallel) == (1, 2)
    no_rdma = layout(NODES, [facts("192.168.100.10"), facts("192.168.100.11")], Options(), LAUNCHER)
    assert no_rdma.nodes[0].env["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_HCA" not in no_rdma.nodes[0].env


def test_llama_cpp_nodes_are_a_head_with_its_workers_rpc_servers():
    found = [facts("10.0.0.1", vllm=False, gpus=0), facts("10.0.0.2", vllm=False, gpus=0),
             facts("10.0.0.3", vllm=False, gpus=0)]
    nodes = [Node("a", "10.0.0.1"), Node("b", "10.0.0.2"), Node("c", "10.0.0.3")]
    plan = layout(nodes, found, Options(gpus=False, rpc_port=50099), LAUNCHER)
    assert plan.problems == () and plan.family == "llama.cpp"
    assert plan.nodes[0].env["RPC_SERVERS"] == "10.0.0.2:50099,10.0.0.3:50099"
    assert "RPC_SERVERS" not in plan.nodes[1].env and "NNODES" not in plan.nodes[0].env
    without = layout(nodes, [dict(f, tools={"llama-server": True, "rpc-server": False}) for f in found],
                     Options(gpus=False), LAUNCHER)
    assert any("no rpc-server" in p and "GGML_RPC" in p for p in without.problems)


@pytest.mark.parametrize(("found", "opts", "cause"), [
    ([facts("192.168.100.10"), dict(facts("10.9.9.9", iface="eth0"), interface=None)], Options(),
     "spark2 (192.168.100.11): no interface of this node has the address 192.168.100.11 (it has: eth0 10.9.9.9, "
     "lo 127.0.0.1)"),
    ([facts("192.168.100.10"), facts("192.168.100.11", up=False)], Options(),
     "spark2 (192.168.100.11): the interface enp1s0f1np1 holding 192.168.100.11 is down"),
    ([facts("192.168.100.10"), facts("192.168.100.11", gpus=0)], Options(),
     "spark2 (192.168.100.11): no GPU is visible in the container"),
    ([facts("192.168.100.10"), facts("192.168.100.11")], Options(backend="ray"),
     "spark1 (192.168.100.10): the Ray backend was asked for, but the image has no Ray"),
])
def test_each_preflight_finding_is_one_line_naming_its_node_and_cause(found, opts, cause):
    problems = layout(NODES, found, opts, LAUNCHER).problems
    assert any(p.startswith(cause) for p in problems), problems


def test_ray_is_taken_where_the_image_has_it():
    found = [facts("192.168.100.10", ray=True), facts("192.168.100.11", ray=True)]
    plan = layout(NODES, found, Options(backend="ray"), LAUNCHER)
    assert plan.problems == () and plan.nodes[1].env["DISTRIBUTED_BACKEND"] == "ray"


def test_nodes_on_the_command_line_are_checked():
    assert parse_node("spark2=192.168.100.11@ssh://me@spark2") == \
        Node("spark2", "192.168.100.11", "ssh://me@spark2", where="--node spark2=192.168.100.11@ssh://me@spark2")
    assert parse_node("b=fd00::2").address == "fd00::2"
    for bad, said in (("spark2", "expected NAME=ADDRESS"), ("Spark=1.2.3.4", "not a node name"),
                      ("s=spark2.local", "not an IP address"), ("s=0.0.0.0", "cannot be a node's address")):
        with pytest.raises(UserError, match=said):
            parse_node(bad)
    with pytest.raises(UserError, match="two nodes have the address 1.2.3.4"):
        check_nodes([Node("a", "1.2.3.4"), Node("b", "1.2.3.4")])
    with pytest.raises(UserError, match="no nodes given"):
        check_nodes([])


def test_a_mistake_in_the_nodes_of_enginebuild_yaml_names_file_line_and_key(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "enginebuild.yaml").write_text("nodes:\n  - name: spark1\n    address: 192.168.100.10\n"
                                               "  - name: spark2\n    adress: 192.168.100.11\n")
    proc = run_in_process(["serve", "stop"], tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "enginebuild.yaml" in proc.stderr and ":5" in proc.stderr and "adress" in proc.stderr, proc.stderr
    (tmp_path / "enginebuild.yaml").write_text("nodes:\n  - {name: spark1, address: 999.1.1.1}\n")
    proc = run_in_process(["serve", "stop"], tmp_path)
    assert proc.returncode == 2 and "nodes[0]" in proc.stderr and "not an IP address" in proc.stderr, proc.stderr
    proc = run_in_process(["serve", "up", "x", "--node", "a=1.2.3.4", "-e", "HF_TOKEN=hf_secret"], tmp_path)
    assert proc.returncode == 2 and "never given on the command line" in proc.stderr
    assert "hf_secret" not in proc.stdout + proc.stderr


GOOD = facts("192.168.100.10", roce={"hca": "rocep1s0f1", "port": 1, "gid_index": 3})


def test_a_nodes_facts_as_the_node_program_prints_them_are_taken():
    assert checked_facts(nodeside.facts("127.0.0.1"))["interface"] == "lo"
    assert checked_facts(GOOD)["roce"]["gid_index"] == 3


@pytest.mark.parametrize("doc", [
    {**GOOD, "interfaces": {"eth0\nNCCL_DEBUG=TRACE": {"addresses": ["10.0.0.1"], "up": True}},
     "interface": "eth0\nNCCL_DEBUG=TRACE"},
    {**GOOD, "interfaces": {"eth0": {"addresses": ["10.0.0.1; rm"], "up": True}}, "interface": "eth0"},
    {**GOOD, "interfaces": {"eth0": {"addresses": [167772161], "up": True}}, "interface": "eth0"},
    {**GOOD, "interface": "eth9"},
    {**GOOD, "roce": {"hca": "rocep1s0f1", "port": 1, "gid_index": "3 -x"}},
    {**GOOD, "roce": {"hca": "mlx5_0 x", "port": 1, "gid_index": 0}},
    {**GOOD, "gpus": 10 ** 9},
    ["interfaces"],
], ids=["a variable in an interface name", "an address that is none", "an address as a number",
        "an interface it does not list", "a GID index that is text", "an RDMA device with a space",
        "a count of GPUs that is none", "not a map"])
def test_a_nodes_facts_are_read_as_hostile_input(doc):
    """What the node program prints comes from a container of an image another party may have
    written, and goes into every node's environment: each value is checked for its form."""
    with pytest.raises(ValueError):
        checked_facts(doc)
