"""Repository-wide settings: enginebuild.yaml at the top of the checkout (optional).

    cache:
      repository: ghcr.io/org/enginebuild-cache   # the registry-backed cache
      push: true                                  # push what is built here (false: read only)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from enginebuild.spec.schema import Bool, Record, Str
from enginebuild.spec.yamlload import YMap, load_yaml_file

FILE = "enginebuild.yaml"
SCHEMA = Record({"cache": Record({"repository": Str(pattern=r"[A-Za-z0-9._:/-]+", what="a registry repository"),
                                  "push": Bool()}, required=("repository",), doc="{repository, push}")},
                doc="enginebuild settings")


@dataclass(frozen=True)
class RepoSettings:
    cache_repository: str | None = None
    cache_push: bool = True


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
    return RepoSettings(cache_repository=cache.get("repository"), cache_push=cache.get("push", True))
