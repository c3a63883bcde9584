"""Image references: parsing `registry/repo:tag@sha256:...` the way the Docker CLI does."""
from __future__ import annotations

import re
from dataclasses import dataclass

DOCKER_HUB = "registry-1.docker.io"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class ImageRef:
    registry: str  # host[:port]
    repository: str
    tag: str | None
    digest: str | None

    @property
    def pinned(self) -> bool:
        return self.digest is not None

    @property
    def name(self) -> str:
        """The repository as the Docker CLI names it (no docker.io/library prefix)."""
        if self.registry == DOCKER_HUB:
            repo = self.repository
            return repo[len("library/"):] if repo.startswith("library/") else repo
        return f"{self.registry}/{self.repository}"

    def with_digest(self, digest: str) -> str:
        return f"{self.name}@{digest}"

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse_image_ref(text: str) -> ImageRef:
    rest, digest = text, None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not _DIGEST.fullmatch(digest):
            raise ValueError(f"invalid digest in {text!r}")
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
    first, _, remainder = rest.partition("/")
    if remainder and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, remainder
    else:
        registry, repository = DOCKER_HUB, rest
        if "/" not in repository:
            repository = f"library/{repository}"
    if registry in ("docker.io", "index.docker.io"):
        registry = DOCKER_HUB
    if not repository:
        raise ValueError(f"no repository in {text!r}")
    return ImageRef(registry, repository, tag if tag or digest else "latest", digest)


def is_local_registry(registry: str) -> bool:
    host = registry.rsplit(":", 1)[0] if not registry.startswith("[") else registry.split("]")[0] + "]"
    return host in ("localhost", "127.0.0.1", "[::1]") or host.startswith("127.")
