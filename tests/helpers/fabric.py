"""A link between test "nodes": a Docker network of its own (internal, a subnet given) on this test
worker's engine, whose bridge forwards between its containers.

A second test worker's engine runs without iptables (tests/helpers/engines.py), while the host
filters bridged packets (br_netfilter) with a FORWARD policy of DROP that the first engine set: a
network of that engine would drop its containers' traffic to each other. The bridge's own traffic
is accepted for the network's life, as Docker's own rule does for a network of an engine with
iptables."""
from __future__ import annotations

import contextlib
import subprocess
import uuid
from collections.abc import Iterator

from helpers.docker import docker


@contextlib.contextmanager
def fabric_network(prefix: str) -> Iterator[str]:
    """The network's name; `prefix`: the first three octets of its /24."""
    name = f"ebfab-{uuid.uuid4().hex[:8]}"  # also its bridge's name: at most 15 characters
    docker("network", "create", "--internal", "--subnet", f"{prefix}.0/24",
           "-o", f"com.docker.network.bridge.name={name}", name)
    rule = ["FORWARD", "-i", name, "-o", name, "-j", "ACCEPT"]
    subprocess.run(["iptables", "-I", *rule], check=True, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(["iptables", "-D", *rule], capture_output=True)
        docker("network", "rm", name, check=False)
