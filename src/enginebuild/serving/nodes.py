"""The nodes an image is served on: each a Docker engine (reached as builders are: this machine's,
a `unix://`, `tcp://` with TLS or `ssh://` address, or a Docker context) and the node's address on
the link between the nodes (the QSFP port's, on two Sparks). The first node is the head.

Given in enginebuild.yaml (`nodes:`, see recipe/repo_settings.py) or on the command line as
`--node NAME=ADDRESS[@ENGINE]`.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from enginebuild.errors import UserError

NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
NETWORK = re.compile(r"host|container:[A-Za-z0-9][A-Za-z0-9_.-]{0,127}|[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


@dataclass(frozen=True)
class Node:
    name: str
    address: str  # an IPv4 or IPv6 address on the link between the nodes
    engine: str = ""  # a DOCKER_HOST address or a Docker context; empty: this machine's engine
    network: str = "host"  # the containers' network: the host's (a Spark), or a Docker network
    where: str = "--node"


def check_node(node: Node) -> Node:
    if not NAME.fullmatch(node.name):
        raise UserError(f"{node.where}: {node.name!r} is not a node name (lower-case letters, digits, . _ -)")
    try:
        address = ipaddress.ip_address(node.address)
    except ValueError:
        raise UserError(f"{node.where}: {node.address!r} is not an IP address",
                        hint="give the node's address on the link between the nodes (ip -br addr on the node)") from None
    if address.is_unspecified or address.is_multicast:
        raise UserError(f"{node.where}: {node.address} cannot be a node's address")
    if not NETWORK.fullmatch(node.network):
        raise UserError(f"{node.where}: network {node.network!r}: host, container:NAME or a Docker network's name")
    return node


def parse_node(text: str) -> Node:
    """NAME=ADDRESS[@ENGINE]"""
    name, eq, rest = text.partition("=")
    if not eq or not rest:
        raise UserError(f"--node {text!r}: expected NAME=ADDRESS[@ENGINE]",
                        hint="for example --node spark2=192.168.100.11@ssh://me@spark2")
    address, _, engine = rest.partition("@")
    return check_node(Node(name, address, engine, where=f"--node {text}"))


def check_nodes(nodes: list[Node]) -> list[Node]:
    if not nodes:
        raise UserError("serve: no nodes given", hint="list them under `nodes:` in enginebuild.yaml, or give "
                                                      "--node NAME=ADDRESS[@ENGINE] for each (the first is the head)")
    for attr in ("name", "address"):
        values = [getattr(n, attr) for n in nodes]
        for value in values:
            if values.count(value) > 1:
                raise UserError(f"serve: two nodes have the {attr} {value}")
    return nodes
