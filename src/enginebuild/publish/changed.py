"""Which images a registry does not hold yet. Every push carries a content tag,
`sha-<16 hex>`, a hash of what the platforms pushed are made of: their runtime keys (every
layer) and their configurations (env, labels, entrypoint, user, healthcheck, ... and `created`),
so the same inputs give the same tag on any machine and a change to either gives another. An
image whose content tag is absent at PREFIX/IMAGE has changed since it was last pushed there;
CI builds and pushes only those."""

from __future__ import annotations

from typing import TYPE_CHECKING

from enginebuild.core.keys import canonical, sha
from enginebuild.oci.reference import ImageRef, parse_destination
from enginebuild.plan.model import ImagePlan

if TYPE_CHECKING:
    from enginebuild.oci.registry import RegistryApi

TAG_VERSION = 2  # 2: the configuration is hashed too (1 hashed the layers alone)


def content_tag(plans: list[ImagePlan], compression: str = "gzip") -> str:
    """The tag naming what these platform plans build (their layers and configurations, in
    platform order); a push of zstd layers (other manifests of the same image) has its own:
    `…-zstd`."""
    made = [{"layers": p.runtime.tip, "config": _settings(p), "created": p.created, "platform": p.platform}
            for p in plans]
    digest = sha(canonical({"v": TAG_VERSION, "images": made}))
    return "sha-" + digest[:16] + ("" if compression == "gzip" else f"-{compression}")


def _settings(plan: ImagePlan) -> object:
    """The image's own settings as its config will carry them (the note for readers of a rendered
    Dockerfile left out)."""
    return plan.config.fields()


def published(client: RegistryApi, repository: str, tag: str) -> str | None:
    """The digest the registry holds at REPOSITORY:TAG, or None."""

    ref, _ = parse_destination(repository)
    found = client.head_digest(ImageRef(ref.registry, ref.repository, tag, None))
    return str(found) if found else None
