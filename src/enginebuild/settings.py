"""Repository-wide settings: enginebuild.yaml at the top of the checkout (optional).

    cache:
      repository: ghcr.io/org/enginebuild-cache   # the registry-backed stage cache
      push: true                                  # push stages built here (false: read only)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from enginebuild.schema import Bool, Record, Str
from enginebuild.yamlload import load_yaml_file

FILE = "enginebuild.yaml"
SCHEMA = Record({"cache": Record({"repository": Str(pattern=r"[A-Za-z0-9._:/-]+", what="a registry repository"),
                                  "push": Bool()}, required=("repository",), doc="{repository, push}")},
                doc="enginebuild settings")


@dataclass(frozen=True)
class Settings:
    cache_repository: str | None = None
    cache_push: bool = True


def load_settings(root: Path) -> Settings:
    path = Path(root) / FILE
    if not path.is_file():
        return Settings()
    tree = load_yaml_file(path, FILE)
    if tree is None:
        return Settings()
    SCHEMA.check(tree, "", getattr(tree, "where", None), partial=False)
    cache = tree.get("cache") or {}
    return Settings(cache_repository=cache.get("repository"), cache_push=cache.get("push", True))
