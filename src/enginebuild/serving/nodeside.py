"""The program each node runs in a container of the served image, sent as `python3 -c` (the
standard library only: it runs in any image with a Python 3).

    facts ADDRESS     one JSON line: the interfaces and their IPv4/IPv6 addresses, the one holding
                      ADDRESS and whether it is up, the RDMA device and RoCE v2 GID index of that
                      interface, GPUs visible, and what the image carries (vllm, torch, ray,
                      llama-server, rpc-server)
    join              reads ENGINEBUILD_SERVE (JSON: rank, nnodes, address, master_addr,
                      master_port, family, backend, rendezvous, check_only, rpc_port, workers,
                      launcher, deadline_s): the nodes meet at the head's master port, vLLM's nodes
                      run a torch.distributed (Gloo) all-reduce over the derived interface, then
                      the node execs its part (the image's launcher; rpc-server on a llama.cpp
                      worker; `ray start` for a Ray cluster)

Every line it prints starts with `enginebuild-serve:`; a failure is one `FAIL` line naming its
cause and a non-zero exit, within the deadline.
"""
from __future__ import annotations

import fcntl
import importlib.util
import ipaddress
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SIOCGIFFLAGS, SIOCGIFADDR, IFF_UP, IFF_RUNNING = 0x8913, 0x8915, 0x1, 0x40
MARK = "enginebuild-serve:"
Doc = dict[str, Any]  # a JSON document
Plan = Doc  # what `join` reads


def say(text: str) -> None:
    print(f"{MARK} {text}", flush=True)


def fail(text: str, code: int = 3) -> None:
    say(f"FAIL {text}")
    sys.exit(code)


def _ioctl(name: str, request: int) -> bytes | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            return fcntl.ioctl(sock.fileno(), request, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None


def interfaces(proc_root: str = "/proc") -> dict[str, Doc]:
    """Each interface: its addresses (IPv4 from the kernel, IPv6 from /proc/net/if_inet6) and
    whether it is up and running."""
    found: dict[str, Doc] = {}
    for _, name in socket.if_nameindex():
        flags = _ioctl(name, SIOCGIFFLAGS)
        state = struct.unpack("H", flags[16:18])[0] if flags else 0
        addresses = []
        packed = _ioctl(name, SIOCGIFADDR)
        if packed:
            addresses.append(socket.inet_ntoa(packed[20:24]))
        found[name] = {"addresses": addresses, "up": bool(state & IFF_UP) and bool(state & IFF_RUNNING)}
    try:
        lines = Path(proc_root, "net/if_inet6").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        fields = line.split()
        if len(fields) == 6 and fields[5] in found:
            text = str(ipaddress.IPv6Address(bytes.fromhex(fields[0])))
            found[fields[5]]["addresses"].append(text)
    return found


def roce(interface: str, address: str, sys_root: str = "/sys") -> Doc | None:
    """The RDMA device of a network interface and the index of its RoCE v2 GID for the address
    (NCCL_IB_HCA, NCCL_IB_GID_INDEX), read from sysfs; None where the interface has no RDMA device."""
    devices = sorted(p.name for p in Path(sys_root, "class/net", interface, "device/infiniband").glob("*"))
    if not devices:
        return None
    hca = devices[0]
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return {"hca": hca, "port": 1, "gid_index": None}
    wanted = ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + ip.packed) if ip.version == 4 else ip
    for port_dir in sorted(Path(sys_root, "class/infiniband", hca, "ports").glob("*")):
        for gid in sorted(port_dir.glob("gids/*"), key=lambda p: int(p.name) if p.name.isdigit() else -1):
            try:
                value = ipaddress.IPv6Address(gid.read_text().strip())
                kind = (port_dir / "gid_attrs/types" / gid.name).read_text().strip()
                ndev = (port_dir / "gid_attrs/ndevs" / gid.name).read_text().strip()
            except (OSError, ValueError):
                continue
            if value == wanted and kind.lower() == "roce v2" and ndev == interface:
                return {"hca": hca, "port": int(port_dir.name), "gid_index": int(gid.name)}
    return {"hca": hca, "port": 1, "gid_index": None}


def gpus(dev_root: str = "/dev") -> int:
    return len([p for p in Path(dev_root).glob("nvidia[0-9]*")])


def _rpc_server() -> str | None:
    """llama.cpp's RPC server, by either of its names."""
    return next((name for name in ("rpc-server", "ggml-rpc-server") if shutil.which(name)), None)


def memory(path: str = "/proc/meminfo") -> Doc | None:
    """MemTotal, MemFree, MemAvailable in bytes (the host's: a container reads the host's meminfo)."""
    found = {}
    try:
        lines = Path(path).read_text().splitlines()[:200]
    except OSError:
        return None
    for line in lines:
        name, _, rest = line.partition(":")
        parts = rest.split()
        if name in ("MemTotal", "MemFree", "MemAvailable") and parts and parts[0].isdigit():
            found[{"MemTotal": "total", "MemFree": "free", "MemAvailable": "available"}[name]] = int(parts[0]) * 1024
    return found if len(found) == 3 else None


def unified() -> bool:
    """Whether a GPU here shares the system's memory: GB10 (DGX Spark) reports no memory of its own."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        name, _, total = line.rpartition(",")
        if "GB10" in name or not total.strip().isdigit():
            return True
    return False


def facts(address: str) -> Doc:
    nets = interfaces()
    holder = next((name for name, net in nets.items() if address in net["addresses"]), None)
    has = {name: importlib.util.find_spec(name) is not None for name in ("vllm", "torch", "ray")}
    tools = {name: shutil.which(name) is not None for name in ("llama-server", "ray", "vllm")}
    tools["rpc-server"] = bool(_rpc_server())
    return {"interfaces": nets, "interface": holder, "up": bool(holder and nets[holder]["up"]),
            "roce": roce(holder, address) if holder else None, "gpus": gpus(), "modules": has, "tools": tools,
            "hostname": socket.gethostname(), "memory": memory(), "unified": gpus() > 0 and unified()}


# -- join -------------------------------------------------------------------------------------
def _left(plan: Plan) -> float:
    return float(plan["_until"]) - time.monotonic()


def _connect(host: str, port: int, plan: Plan, what: str) -> socket.socket:
    """A connection to host:port, tried until the deadline; the last error names the cause."""
    last = "no answer"
    while _left(plan) > 0:
        try:
            return socket.create_connection((host, port), timeout=min(3.0, max(0.5, _left(plan))))
        except TimeoutError:
            last = "timed out (a firewall dropping it, or no route)"
        except ConnectionRefusedError:
            last = "refused (nothing listens there yet)"
        except OSError as exc:
            last = exc.strerror or str(exc)
        time.sleep(0.3)
    fail(f"{what} {host}:{port} did not answer within {plan['deadline_s']} s: {last}")
    raise AssertionError  # unreachable


def _head_barrier(plan: Plan) -> None:
    """The head waits at its master port for every worker to say who it is, then tells them to go."""
    with socket.socket(socket.AF_INET6 if ":" in plan["address"] else socket.AF_INET) as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind((plan["address"], plan["master_port"]))
        except OSError as exc:
            fail(f"cannot listen on {plan['address']}:{plan['master_port']} (the master port): {exc.strerror or exc}")
        server.listen(64)
        joined: dict[int, socket.socket] = {}
        while len(joined) < plan["nnodes"] - 1:
            server.settimeout(max(0.1, _left(plan)))
            try:
                conn, _ = server.accept()
                conn.settimeout(5)
                hello = json.loads(conn.makefile().readline())
            except TimeoutError:
                missing = [w for w in range(1, plan["nnodes"]) if w not in joined]
                fail(f"node(s) of rank {', '.join(map(str, missing))} did not reach the master port "
                     f"{plan['address']}:{plan['master_port']} within {plan['deadline_s']} s")
            except (OSError, ValueError):
                continue
            joined[int(hello.get("rank", -1))] = conn
            say(f"rank {hello.get('rank')} joined from {hello.get('address')}")
        for conn in joined.values():
            conn.sendall(b'{"go": true}\n')
            conn.close()


def _worker_barrier(plan: Plan) -> None:
    conn = _connect(plan["master_addr"], plan["master_port"], plan, "the head's master port")
    with conn:
        conn.sendall((json.dumps({"rank": plan["rank"], "address": plan["address"]}) + "\n").encode())
        conn.settimeout(max(0.5, _left(plan)))
        try:
            answer = conn.makefile().readline()
        except (TimeoutError, OSError) as exc:
            fail(f"the head at {plan['master_addr']}:{plan['master_port']} did not give the go: {exc}")
        if not answer.strip():
            fail(f"the head at {plan['master_addr']}:{plan['master_port']} closed the meeting (it failed: see its line)")
    say(f"joined the head at {plan['master_addr']}:{plan['master_port']}")


def _rendezvous(plan: Plan) -> None:
    """torch.distributed over Gloo, as vLLM's nodes meet: world size = nodes, an all-reduce of
    rank + 1 whose sum every node checks."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    try:
        dist.init_process_group("gloo", init_method=f"tcp://{plan['master_addr']}:{plan['master_port']}",
                                rank=plan["rank"], world_size=plan["nnodes"],
                                timeout=timedelta(seconds=max(5, int(_left(plan)))))
        value = torch.tensor([float(plan["rank"] + 1)])
        dist.all_reduce(value)
        dist.destroy_process_group()
    except Exception as exc:  # torch's own words name the cause
        fail(f"the Gloo rendezvous at {plan['master_addr']}:{plan['master_port']} failed: "
             f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    want = plan["nnodes"] * (plan["nnodes"] + 1) / 2
    if value.item() != want:
        fail(f"the Gloo all-reduce gave {value.item()}, not {want}")
    say(f"rendezvous: world size {plan['nnodes']}, all-reduce sum {value.item():g} (Gloo over "
        f"{os.environ.get('GLOO_SOCKET_IFNAME', '?')})")


def _wait_rpc_workers(plan: Plan) -> None:
    for worker in plan["workers"]:
        _connect(worker, plan["rpc_port"], plan, "the rpc-server of").close()
        say(f"rpc-server at {worker}:{plan['rpc_port']} answers")


def _ray(plan: Plan) -> list[str] | None:
    """The argv a Ray node execs (a worker blocks in `ray start`); the head starts Ray and goes on."""
    port = str(plan["ray_port"])
    if plan["rank"] == 0:
        started = subprocess.run(["ray", "start", "--head", "--node-ip-address", plan["address"], "--port", port,
                                  "--disable-usage-stats"], capture_output=True, text=True)
        if started.returncode != 0:
            fail(f"`ray start --head` failed: {(started.stderr or started.stdout).strip().splitlines()[-1:]}")
        count = "import ray; ray.init(address='auto'); print(sum(1 for n in ray.nodes() if n['Alive']))"
        alive = 1
        plan["_until"] = time.monotonic() + float(plan["deadline_s"]) + 30  # the workers' `ray start` join late
        while alive < plan["nnodes"] and _left(plan) > 0:
            said = subprocess.run([sys.executable, "-c", count], capture_output=True, text=True)
            alive = int(said.stdout.split()[-1]) if said.returncode == 0 and said.stdout.split() else alive
            time.sleep(1)
        if alive < plan["nnodes"]:
            fail(f"the Ray cluster has {alive} of {plan['nnodes']} nodes: a worker's `ray start` did not join")
        return None
    return ["ray", "start", "--address", f"{plan['master_addr']}:{port}", "--node-ip-address", plan["address"],
            "--block", "--disable-usage-stats"]


def join(plan: Plan) -> None:
    # the head waits a little longer than its workers: a worker that cannot reach it names why first
    plan["_until"] = time.monotonic() + float(plan["deadline_s"]) + (3 if plan["rank"] == 0 else 0)
    say(f"node rank {plan['rank']} of {plan['nnodes']} at {plan['address']}, head {plan['master_addr']}:"
        f"{plan['master_port']}")
    (_head_barrier if plan["rank"] == 0 else _worker_barrier)(plan)
    if plan.get("rendezvous"):
        _rendezvous(plan)
    argv = list(plan["launcher"])
    env = dict(os.environ)
    env.pop("ENGINEBUILD_SERVE", None)
    if plan["family"] == "llama.cpp" and plan["rank"] > 0:
        argv = [_rpc_server() or "rpc-server", "-H", plan["address"], "-p", str(plan["rpc_port"])]
    elif plan["family"] == "llama.cpp" and plan["workers"]:
        if not plan.get("check_only"):
            _wait_rpc_workers(plan)
    elif plan["backend"] == "ray" and not plan.get("check_only"):
        argv = _ray(plan) or argv
    if plan.get("check_only"):
        if argv == list(plan["launcher"]):  # the image's launcher says what it would run
            env["LAUNCH_DRY_RUN"] = "1"
            shown = subprocess.run(argv, env=env, capture_output=True, text=True)
            if shown.returncode != 0:
                fail(f"the launcher refused: {(shown.stderr or shown.stdout).strip()[-500:]}")
            argv = [line[5:] for line in shown.stdout.splitlines() if line.startswith("arg: ")]
        say("command: " + json.dumps(argv))
        say("checked")
        return
    say("started: " + " ".join(argv))
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        fail(f"cannot run {argv[0]}: {exc.strerror or exc}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["facts"] and len(argv) == 2:
        print(json.dumps(facts(argv[1])), flush=True)
    elif argv[:1] == ["join"]:
        join(json.loads(os.environ["ENGINEBUILD_SERVE"]))
    else:
        fail("usage: facts ADDRESS | join", 2)


if __name__ == "__main__":
    main(sys.argv[1:])
