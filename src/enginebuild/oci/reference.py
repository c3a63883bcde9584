"""Image references: parsing `registry/repo:tag@sha256:...` the way the Docker CLI does."""
from __future__ import annotations

import re
from dataclasses import dataclass

from enginebuild.errors import UserError

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


REPOSITORY = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*")
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]{1,5})?"
                  r"|\[[0-9a-fA-F:]+\](?::[0-9]{1,5})?")


def parse_destination(text: str) -> tuple[ImageRef, str | None]:
    """A push target, REGISTRY/REPOSITORY[:TAG], checked against the distribution spec's grammar.

    Refused: no registry host (`127.0.0.1:5055` alone), upper case, spaces, `..`, `//`, a
    trailing `/`, a leading `-`, an empty tag, a digest, non-ASCII, more than 255 characters."""
    problems = []
    if len(text) > 255:
        problems.append(f"it is {len(text)} characters long; a reference has at most 255")
    if not text.isascii() or any(c.isspace() for c in text):
        problems.append("it may contain only ASCII letters, digits and . _ - / :")
    if "@" in text:
        problems.append("push to a repository (and tag), not to a digest")
    if text.startswith("-") or "//" in text or text.endswith("/") or ".." in text:
        problems.append("it may not start with '-', end with '/', or contain '//' or '..'")
    host, slash, rest = text.partition("/")
    if not slash or not rest:
        problems.append("name the registry and the repository (REGISTRY/REPOSITORY, e.g. ghcr.io/org/image); "
                        f"{text!r} has no repository")
    elif not HOST.fullmatch(host) or not ("." in host or ":" in host or host == "localhost" or host.startswith("[")):
        problems.append(f"{host!r} is not a registry host (a name with a dot or a port, such as ghcr.io "
                        "or 127.0.0.1:5000)")
    tag = None
    if rest and ":" in rest.rsplit("/", 1)[-1]:
        rest, tag = rest.rsplit(":", 1)
        if not TAG.fullmatch(tag):
            problems.append(f"the tag {tag!r} is not a valid tag (1-128 of A-Z a-z 0-9 _ . -, not starting with . or -)")
    if rest and not REPOSITORY.fullmatch(rest):
        problems.append(f"the repository {rest!r} must be lower case: a-z 0-9 separated by . _ - or /")
    if problems:
        raise UserError(f"--to {text!r}: " + "; ".join(problems))
    return ImageRef(host, rest, tag, None), tag


def is_local_registry(registry: str) -> bool:
    host = registry.rsplit(":", 1)[0] if not registry.startswith("[") else registry.split("]")[0] + "]"
    return host in ("localhost", "127.0.0.1", "[::1]") or host.startswith("127.")
