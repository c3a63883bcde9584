"""Which images a registry does not hold yet. Every push carries a content tag,
`sha-<16 hex>`, a hash of the runtime keys of the platforms pushed: the same inputs give the
same tag on any machine. An image whose content tag is absent at PREFIX/IMAGE has changed since
it was last pushed there; CI builds and pushes only those."""

from __future__ import annotations

from typing import Any

from enginebuild.core.keys import sha
from enginebuild.oci.reference import ImageRef, parse_destination


def content_tag(plans: list[Any], compression: str = "gzip") -> str:
    """The tag naming what these platform plans build (the runtime keys, in platform order); a push
    of zstd layers (other manifests of the same image) has its own: `…-zstd`."""
    return "sha-" + sha("".join(p.runtime.tip for p in plans))[:16] + ("" if compression == "gzip" else f"-{compression}")


def published(client: Any, repository: str, tag: str) -> str | None:
    """The digest the registry holds at REPOSITORY:TAG, or None."""

    ref, _ = parse_destination(repository)
    found = client.head_digest(ImageRef(ref.registry, ref.repository, tag, None))
    return str(found) if found else None
