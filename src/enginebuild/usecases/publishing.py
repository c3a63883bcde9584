"""`changed`, the use case: which images a registry does not hold at their current inputs (their
content tag absent from PREFIX/IMAGE). Read-only: nothing is built, no lock is written."""

from __future__ import annotations

from enginebuild.io.progress import output
from enginebuild.oci.registry import RegistryClient
from enginebuild.plan.image import plan_image
from enginebuild.publish.changed import content_tag, published
from enginebuild.usecases.targets import destination, platforms_of
from enginebuild.wire import JsonDoc
from enginebuild.workspace import Workspace


def unpushed(ws: Workspace, images: list[str], prefix: str, platforms: list[str], compression: str) -> list[JsonDoc]:
    """One row per image: its repository, content tag, the digest found there (None: not pushed)."""

    client = RegistryClient()
    rows = []
    for name in ws.select(images):
        spec = ws.spec(name)
        lock = ws.lock(spec)
        blocked = lock.blocked() if lock is not None and not images else {}
        if blocked:  # every buildable image, as the help says: this one is not buildable here
            first, why = next(iter(blocked.items()))
            output().say(f"{name}: skipped, not buildable here ({first}: {why})")
            continue
        plans = [plan_image(spec, lock, p, ws.plan_options()) for p in platforms_of(spec, platforms)]
        repository = f"{prefix.rstrip('/')}/{name}"
        destination(repository, [])  # a bad prefix is refused before the registry is asked
        tag = content_tag(plans, compression)
        digest = published(client, repository, tag)
        rows.append({"image": name, "repository": repository, "tag": tag, "digest": digest,
                     "changed": digest is None})
    return rows
