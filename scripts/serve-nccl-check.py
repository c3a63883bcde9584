"""Two ranks on two GPUs of one machine meet as `serve`'s nodes do, with NCCL over sockets: the
node's facts read by serving/nodeside.py, the communication environment derived by
serving/layout.py (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, NCCL_IB_DISABLE, ...), then an
all-reduce of CUDA tensors. Shared memory and peer-to-peer are turned off so NCCL must use its
socket transport, as between two Sparks without RoCE. Needs torch with CUDA and two GPUs.

    PYTHONPATH=src python3 scripts/serve-nccl-check.py [--address IP] [--port 29511]

Prints the environment, NCCL's transport lines, the sums, and `ok` (exit 0) or the failure.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

RANK = """
import os, sys, torch, torch.distributed as dist
from datetime import timedelta
rank = int(sys.argv[1])
dist.init_process_group("nccl", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                        rank=rank, world_size=2, timeout=timedelta(seconds=60))
value = torch.full((1 << 20,), float(rank + 1), device="cuda")
dist.all_reduce(value)
torch.cuda.synchronize()
print(f"rank {rank}: {torch.cuda.get_device_name()} all-reduce sum {value[0].item():g} over {value.numel()} floats",
      flush=True)
dist.destroy_process_group()
"""


def main() -> int:
    from enginebuild.serving import nodeside
    from enginebuild.serving.layout import communication_env
    from enginebuild.serving.nodes import Node

    parser = argparse.ArgumentParser()
    parser.add_argument("--address", help="this machine's address to meet on (default: its first non-loopback IPv4)")
    parser.add_argument("--port", type=int, default=29511)
    args = parser.parse_args()
    nets = nodeside.interfaces()
    address = args.address or next((a for name, net in sorted(nets.items()) if name != "lo"
                                    for a in net["addresses"] if ":" not in a), "127.0.0.1")
    facts = nodeside.facts(address)
    if not facts["interface"]:
        print(f"no interface holds {address}: {nets}")
        return 1
    env, _ = communication_env(Node("gpu-host", address), facts)
    env.update({"MASTER_ADDR": address, "MASTER_PORT": str(args.port), "NCCL_SHM_DISABLE": "1",
                "NCCL_P2P_DISABLE": "1", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"})
    print("environment:", " ".join(f"{k}={v}" for k, v in sorted(env.items())), flush=True)
    ranks = [subprocess.Popen([sys.executable, "-c", RANK, str(rank)],
                              env={**os.environ, **env, "CUDA_VISIBLE_DEVICES": str(rank)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]
    outputs = [p.communicate(timeout=300)[0] for p in ranks]
    ok = all(p.returncode == 0 for p in ranks)
    for rank, out in enumerate(outputs):
        for line in out.splitlines():
            if line.startswith("rank ") or "NET/" in line or "Using network" in line or "via NET" in line \
                    or "Error" in line or "error" in line:
                print(f"[{rank}] {line}")
    sums = [line for out in outputs for line in out.splitlines() if "all-reduce sum 3 " in line]
    ok = ok and len(sums) == 2 and all("via NET/Socket" in out or "NET/Socket" in out for out in outputs)
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
