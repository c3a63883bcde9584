"""What each node of a served cluster runs, from what the nodes said of themselves (their facts,
read in a container of the image on each node): the engine family, the backend, the parallel
sizes, and per node its role, its communication environment and the preflight's findings.

Pure: no engine is reached here (serving/driver.py reads the facts and starts the containers).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from enginebuild.serving.nodes import Node
from enginebuild.wire import JsonDoc

FAMILIES = ("vllm", "llama.cpp")
BACKENDS = ("native", "ray")


@dataclass(frozen=True)
class Options:
    master_port: int = 29500
    rpc_port: int = 50052
    ray_port: int = 6379
    backend: str = "native"  # vLLM: its own multi-node executor, or Ray
    pipeline: bool = False  # vLLM: the nodes as pipeline stages instead of one tensor-parallel group
    gpus: bool = True  # a GPU is expected on every node
    deadline_s: int = 20  # the nodes meet within this, or the cause is named
    gpus_asked: str = "auto"  # --gpus: all, none, or auto (all where every node's engine has the NVIDIA runtime)
    restart: str = "no"  # the containers' restart policy: no, on-failure (3 tries), unless-stopped


@dataclass(frozen=True)
class NodePlan:
    node: Node
    rank: int
    env: dict[str, str]  # the communication environment derived for this host, and the multi-node variables
    join: JsonDoc  # what serving/nodeside.py's `join` reads
    devices: tuple[str, ...] = ()  # host devices the container needs (RDMA)


@dataclass(frozen=True)
class Layout:
    family: str
    nodes: tuple[NodePlan, ...]
    problems: tuple[str, ...] = field(default=())  # one line each, naming its node and cause
    tensor_parallel: int = 1
    pipeline_parallel: int = 1


IFACE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")  # a Linux interface name (IFNAMSIZ)
RDMA = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def checked_facts(doc: object) -> JsonDoc:
    """A node's facts as nodeside.py prints them, each value checked for its type and form (they come
    from a container of an image another party may have written; they go into the environment of
    every node): a ValueError names the first that is not."""
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    nets = _interfaces(doc.get("interfaces"))
    iface = doc.get("interface")
    if iface is not None and iface not in nets:
        raise ValueError("interface: not one of its interfaces")
    rdma = doc.get("roce")
    if rdma is not None and not (isinstance(rdma, dict) and RDMA.fullmatch(str(rdma.get("hca")))
                                 and _int(rdma.get("port"), 1, 255)
                                 and (rdma.get("gid_index") is None or _int(rdma.get("gid_index"), 0, 65535))):
        raise ValueError("roce: not an RDMA device with its port and GID index")
    if not _int(doc.get("gpus"), 0, 1024):
        raise ValueError("gpus: not a count")
    for key in ("modules", "tools"):
        found = doc.get(key)
        if not isinstance(found, dict) or not all(isinstance(v, bool) for v in found.values()):
            raise ValueError(f"{key}: not a map of yes and no")
    memory = doc.get("memory")
    if memory is not None and not (isinstance(memory, dict) and set(memory) == {"total", "free", "available"}
                                   and all(_int(v, 0, 1 << 50) for v in memory.values()) and memory["total"] > 0):
        raise ValueError("memory: not the node's total, free and available bytes")
    return {"interfaces": nets, "interface": iface, "up": doc.get("up") is True, "roce": rdma, "gpus": doc["gpus"],
            "modules": doc["modules"], "tools": doc["tools"], "memory": memory, "unified": doc.get("unified") is True}


def _interfaces(nets: object) -> JsonDoc:
    """The node's interfaces, each with whether it is up and its addresses (checked as addresses)."""
    if not isinstance(nets, dict) or len(nets) > 512:
        raise ValueError("interfaces: not a map of at most 512")
    for name, net in nets.items():
        if not IFACE.fullmatch(name) or not isinstance(net, dict) or not isinstance(net.get("up"), bool) \
                or not isinstance(net.get("addresses"), list) or len(net["addresses"]) > 256:
            raise ValueError(f"interfaces: {str(name)[:40]!r} is not an interface with its addresses")
        for address in net["addresses"]:
            if not isinstance(address, str):
                raise ValueError(f"interfaces: {name}: {str(address)[:40]!r} is not an address")
            ipaddress.ip_address(address)
    return nets


def _int(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def family_of(facts: JsonDoc) -> str | None:
    modules, tools = facts.get("modules") or {}, facts.get("tools") or {}
    if modules.get("vllm") or tools.get("vllm"):
        return "vllm"
    if tools.get("llama-server"):
        return "llama.cpp"
    return None


def communication_env(node: Node, facts: JsonDoc) -> tuple[dict[str, str], tuple[str, ...]]:
    """The interface of the node's address named for every library that opens sockets (NCCL, Gloo,
    UCX, PyTorch's TensorPipe, vLLM itself); RoCE's device and GID index where the interface has an
    RDMA device, else NCCL told not to look for InfiniBand."""
    iface = str(facts["interface"])
    env = {"VLLM_HOST_IP": node.address, "NCCL_SOCKET_IFNAME": iface, "GLOO_SOCKET_IFNAME": iface,
           "TP_SOCKET_IFNAME": iface, "UCX_NET_DEVICES": iface, "OMPI_MCA_btl_tcp_if_include": iface}
    rdma = facts.get("roce")
    if rdma:
        env["NCCL_IB_HCA"] = f"{rdma['hca']}:{rdma['port']}"
        if rdma.get("gid_index") is not None:
            env["NCCL_IB_GID_INDEX"] = str(rdma["gid_index"])
        return env, ("/dev/infiniband",)
    env["NCCL_IB_DISABLE"] = "1"
    return env, ()


def _node_problems(node: Node, facts: JsonDoc, opts: Options, family: str | None) -> list[str]:
    where = f"{node.name} ({node.address})"
    if not facts.get("interface"):
        shown = ", ".join(f"{name} {' '.join(map(str, net['addresses'])) or '(no address)'}"
                          for name, net in sorted((facts.get("interfaces") or {}).items()))
        return [f"{where}: no interface of this node has the address {node.address} (it has: {shown}): "
                f"give the node's address on the link between the nodes"]
    problems = []
    if not facts.get("up"):
        problems.append(f"{where}: the interface {facts['interface']} holding {node.address} is down")
    if opts.gpus and not facts.get("gpus"):
        problems.append(f"{where}: no GPU is visible in the container (no /dev/nvidia*): the NVIDIA container "
                        f"runtime is missing or the engine gave none (--gpus none serves without one)")
    if opts.backend == "ray" and family == "vllm" and not (facts.get("modules") or {}).get("ray"):
        problems.append(f"{where}: the Ray backend was asked for, but the image has no Ray (`verify` lists its "
                        f"closure): serve with the native multi-node executor (--backend native) or add ray to "
                        f"the image's requirements")
    return problems


def layout(nodes: list[Node], facts: list[JsonDoc], opts: Options, launcher: list[str]) -> Layout:
    """Every node's plan; the problems found, each on its own line (none: the nodes may start)."""
    families = {family_of(f) for f in facts}
    family = families.pop() if len(families) == 1 else None
    problems: list[str] = []
    if family is None:
        problems.append("the image serves neither vLLM (no vllm module) nor llama.cpp (no llama-server): "
                        "nothing to spread over nodes")
    if family == "llama.cpp" and opts.backend == "ray":
        problems.append("--backend ray is vLLM's: llama.cpp's nodes meet through its RPC backend")
    if family == "llama.cpp" and len(nodes) > 1 and not all((f.get("tools") or {}).get("rpc-server") for f in facts):
        problems.append("the image has no rpc-server: build llama.cpp with its RPC backend (the component's "
                        "build arg GGML_RPC: \"ON\")")
    gpus = [int(f.get("gpus") or 0) for f in facts]
    per_node = max(1, min(gpus)) if opts.gpus else 1
    tp, pp = (per_node, len(nodes)) if opts.pipeline else (per_node * len(nodes), 1)
    head = nodes[0]
    plans = []
    for rank, (node, found) in enumerate(zip(nodes, facts, strict=True)):
        problems += _node_problems(node, found, opts, family)
        if not found.get("interface"):
            continue
        env, devices = communication_env(node, found)
        if family == "vllm":
            env.update({"NNODES": str(len(nodes)), "NODE_RANK": str(rank), "MASTER_ADDR": head.address,
                        "MASTER_PORT": str(opts.master_port), "TENSOR_PARALLEL_SIZE": str(tp),
                        "PIPELINE_PARALLEL_SIZE": str(pp),
                        "DISTRIBUTED_BACKEND": "ray" if opts.backend == "ray" else "mp"})
        elif family == "llama.cpp" and rank == 0 and len(nodes) > 1:
            env["RPC_SERVERS"] = ",".join(f"{_host(n.address)}:{opts.rpc_port}" for n in nodes[1:])
        join = {"rank": rank, "nnodes": len(nodes), "address": node.address, "master_addr": head.address,
                "master_port": opts.master_port, "family": family, "backend": opts.backend,
                "rendezvous": family == "vllm" and bool((found.get("modules") or {}).get("torch")) and len(nodes) > 1,
                "rpc_port": opts.rpc_port, "ray_port": opts.ray_port, "workers": [n.address for n in nodes[1:]],
                "launcher": launcher, "deadline_s": opts.deadline_s}
        plans.append(NodePlan(node, rank, env, join, devices))
    return Layout(family or "?", tuple(plans), tuple(problems), tp, pp)


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address
