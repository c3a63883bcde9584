"""Repository-wide settings: enginebuild.yaml at the top of the checkout (optional).

    cache:
      repository: ghcr.io/org/enginebuild-cache   # the registry-backed cache
      push: true                                  # push what is built here (false: read only)
      trust: [ed25519:BASE64...]                  # keys whose entries are taken (docs/cache.md)
    builders:                                     # the Docker engines components are built on
      - name: spark1
        host: unix:///var/run/docker.sock         # a DOCKER_HOST address (unix://, tcp://, ssh://)
      - name: spark2
        context: spark2                           # or a Docker context
        platforms: [linux/arm64]                  # what it builds natively (default: read from the engine)
    nodes:                                        # the nodes `serve` spreads an image over (the first: the head)
      - name: spark1
        address: 192.168.100.10                   # its address on the link between the nodes (QSFP)
      - name: spark2
        address: 192.168.100.11
        context: spark2                           # its engine: host: ADDRESS or context: NAME (default: this machine's)
    tags: ["ghcr.io/me/{image}:dev"]              # local tags every `image` also gives (as -t), {image} its name
    mirrors:                                      # git sources fetched from elsewhere (the lock keeps upstream's)
      - upstream: https://github.com/0xSero/turboquant
        at: ../mirrors/turboquant.bundle          # a git bundle, a repository, or a URL; a path is the checkout's
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from enginebuild.core.schema import Bool, ListOf, Record, Str
from enginebuild.core.yamlload import YMap, load_yaml_file
from enginebuild.errors import UserError
from enginebuild.recipe.fields import PLATFORM
from enginebuild.settings import mirror_place

FILE = "enginebuild.yaml"
NAME = r"[a-z0-9][a-z0-9._-]{0,62}"
BUILDER = Record({"name": Str(pattern=NAME, what="a builder name (lower-case letters, digits, . _ -)"),
                  "host": Str(pattern=r"(?:unix|tcp|ssh)://\S+", what="a Docker engine address (unix://, tcp://, ssh://)"),
                  "context": Str(pattern=r"[A-Za-z0-9][A-Za-z0-9._-]*", what="a Docker context name"),
                  "platforms": ListOf(Str(pattern=PLATFORM, what="a platform such as linux/arm64"), unique=True,
                                      max_items=8)},
                 required=("name",), exclusive=(("host", "context"),), need_one_of=("host", "context"),
                 doc="{name, host | context, platforms}")
NODE = Record({"name": Str(pattern=NAME, what="a node name (lower-case letters, digits, . _ -)"),
               "address": Str(pattern=r"[0-9A-Fa-f.:]{2,45}", what="the node's IP address on the link between the nodes"),
               "host": Str(pattern=r"(?:unix|tcp|ssh)://\S+", what="a Docker engine address (unix://, tcp://, ssh://)"),
               "context": Str(pattern=r"[A-Za-z0-9][A-Za-z0-9._-]*", what="a Docker context name"),
               "network": Str(pattern=r"host|container:[A-Za-z0-9][A-Za-z0-9_.-]*|[A-Za-z0-9][A-Za-z0-9_.-]*",
                              what="host, container:NAME or a Docker network's name")},
              required=("name", "address"), exclusive=(("host", "context"),), doc="{name, address, host | context, network}")
SCHEMA = Record({"cache": Record({"repository": Str(pattern=r"[A-Za-z0-9._:/-]+", what="a registry repository"),
                                  "push": Bool(),
                                  "trust": ListOf(Str(pattern=r"ed25519:[A-Za-z0-9+/]{43}=",
                                                      what="a cache key: ed25519: and the base64 of 32 bytes"),
                                                  unique=True, max_items=64)},
                 doc="{repository, push, trust}"),
                 "builders": ListOf(BUILDER, max_items=64),
                 "nodes": ListOf(NODE, max_items=64),
                 "tags": ListOf(Str(pattern=r"\S*\{image\}\S*", what="a NAME[:TAG] with {image} in it"),
                                unique=True, max_items=16),
                 "mirrors": ListOf(Record({"upstream": Str(pattern=r"(?:https?|ssh|git)://\S+|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:\S*",
                                                           what="a git URL (or a prefix of URLs ending in /)"),
                                           "at": Str(pattern=r"\S+", what="a git bundle, a repository or a URL")},
                                          required=("upstream", "at"), doc="{upstream, at}"), max_items=256)},
                doc="enginebuild settings")


@dataclass(frozen=True)
class BuilderEntry:
    name: str
    address: str  # a DOCKER_HOST address, or a Docker context's name
    platforms: tuple[str, ...] = ()
    where: str = FILE


@dataclass(frozen=True)
class NodeEntry:
    name: str
    address: str
    engine: str  # a DOCKER_HOST address or a Docker context's name; empty: this machine's engine
    network: str
    where: str


@dataclass(frozen=True)
class RepoSettings:
    cache_repository: str | None = None
    cache_push: bool = True
    cache_trust: tuple[str, ...] = ()  # public keys whose cache entries are taken (registrycache/cachetrust.py)
    builders: tuple[BuilderEntry, ...] = ()
    nodes: tuple[NodeEntry, ...] = ()  # what `serve` spreads an image over
    tags: tuple[str, ...] = ()  # local tags every build also gets, `{image}` replaced (as -t)
    mirrors: tuple[tuple[str, str], ...] = ()  # (upstream git URL or prefix, where to fetch it: a path made absolute)


def load_repo_settings(root: Path) -> RepoSettings:
    path = Path(root) / FILE
    if not path.is_file():
        return RepoSettings()
    tree = load_yaml_file(path, FILE)
    if tree is None:
        return RepoSettings()
    SCHEMA.check(tree, "", getattr(tree, "where", None), partial=False)
    assert isinstance(tree, YMap)
    cache = tree.get("cache") or {}
    builders = []
    for index, item in enumerate(tree.get("builders") or ()):
        where = getattr(item, "where", None)
        line = str(where) if where is not None else FILE
        builders.append(BuilderEntry(str(item["name"]), str(item.get("host") or item.get("context")),
                                     tuple(item.get("platforms") or ()), f"{line}: builders[{index}]"))
    names = [b.name for b in builders]
    for name in names:
        if names.count(name) > 1:
            raise UserError(f"{FILE}: builders: the name {name!r} is given twice")
    nodes = tuple(NodeEntry(str(n["name"]), str(n["address"]), str(n.get("host") or n.get("context") or ""),
                            str(n.get("network") or "host"),
                            f"{getattr(n, 'where', None) or FILE}: nodes[{index}]")
                  for index, n in enumerate(tree.get("nodes") or ()))
    mirrors = tuple((str(m["upstream"]), _where(root, str(m["at"]))) for m in tree.get("mirrors") or ())
    return RepoSettings(cache_repository=cache.get("repository"), cache_push=cache.get("push", True),
                        cache_trust=tuple(cache.get("trust") or ()),
                        builders=tuple(builders), nodes=nodes, tags=tuple(tree.get("tags") or ()), mirrors=mirrors)


def _where(root: Path, at: str) -> str:
    """A mirror's place: a URL as given, a path made absolute from the checkout's root."""
    return mirror_place(Path(root).resolve(), at)
