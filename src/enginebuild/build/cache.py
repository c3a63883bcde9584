"""A registry as the shared, content-addressed store of stages.

Stage `KEY` lives at `CACHE:KEY`. Whether it is there is asked with a HEAD (nothing is
pulled to find out); a hit is pulled, checked (its label must carry the same key) and
tagged as the local stage; a stage built here is pushed there. Two builders of the same
key push images of the same inputs under the same tag, so either push is a valid answer.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

from enginebuild.engine_api import EngineAPI, docker_host
from enginebuild.errors import RegistryError, UserError
from enginebuild.reference import ImageRef, parse_image_ref
from enginebuild.registry import RegistryClient
from enginebuild.stages import STAGE_REPO


def parse_cache_repo(text: str) -> ImageRef:
    try:
        ref = parse_image_ref(text)
    except ValueError as exc:
        raise UserError(f"cache repository {text!r}: {exc}") from None
    if ref.digest or ":" in text.rsplit("/", 1)[-1]:
        raise UserError(f"cache repository {text!r}: name a repository (REGISTRY/REPO), without a tag or digest")
    return ref


@dataclass
class StageCache:
    repo: ImageRef
    push_enabled: bool = True
    client: RegistryClient | None = None

    def __post_init__(self):
        self.client = self.client or RegistryClient()
        self._known: dict = {}

    @property
    def name(self) -> str:
        return self.repo.name

    def has(self, key: str) -> bool:
        if key not in self._known:
            ref = ImageRef(self.repo.registry, self.repo.repository, key, None)
            self._known[key] = self.client.head_digest(ref) is not None
        return self._known[key]

    def pull(self, key: str, engine: EngineAPI) -> bool:
        """Pull CACHE:KEY and make it the local stage; False (and nothing kept) if it is not that stage."""
        import docker
        from docker.errors import DockerException

        client = docker.APIClient(base_url=docker_host(), version="auto", timeout=3600)
        try:
            for event in client.pull(self.name, tag=key, stream=True, decode=True):
                if "error" in event:
                    raise RegistryError(f"pull of {self.name}:{key} failed: {event['error']}")
        except DockerException as exc:
            raise RegistryError(f"pull of {self.name}:{key} failed: {exc}") from None
        finally:
            client.close()
        pulled = engine.inspect(f"{self.name}:{key}") or {}
        labels = (pulled.get("Config") or {}).get("Labels") or {}
        if labels.get("org.enginebuild.key") != key:
            print(f"  warning: {self.name}:{key} is not the stage it is named after "
                  f"(its label says {labels.get('org.enginebuild.key')!r}); building instead", file=sys.stderr)
            engine.remove(f"{self.name}:{key}", force=True)
            return False
        engine.tag(f"{self.name}:{key}", STAGE_REPO, key)
        return True

    def push(self, key: str, engine: EngineAPI) -> dict:
        from enginebuild.pushing import push_and_verify

        result = push_and_verify(f"{STAGE_REPO}:{key}", self.repo, key, engine)
        self._known[key] = True
        return result


def cache_from_settings(ws, cli_repo: str | None, disabled: bool, readonly: bool) -> StageCache | None:
    """--cache, else $ENGINEBUILD_CACHE, else `cache:` in enginebuild.yaml; --no-cache turns it off."""
    import os

    from enginebuild.settings import load_settings

    if disabled:
        return None
    settings = load_settings(ws.root)
    repo = cli_repo or os.environ.get("ENGINEBUILD_CACHE") or settings.cache_repository
    if not repo:
        return None
    push = settings.cache_push and not readonly and os.environ.get("ENGINEBUILD_CACHE_READONLY", "") not in ("1", "true")
    return StageCache(parse_cache_repo(repo), push_enabled=push)
