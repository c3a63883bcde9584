"""`fetch`, the use case: every pinned input of the images (sdists, wheels, .debs, git commits,
URLs, the source trees components build from) downloaded into the store and verified; what it
fetched is returned per image, as each image is done."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from enginebuild.execution.fetch import Fetcher, git_wheels, plan_downloads
from enginebuild.io.store import Store
from enginebuild.layerkinds.context import FromSource
from enginebuild.plan.image import plan_image
from enginebuild.usecases.targets import platforms_of
from enginebuild.workspace import Workspace


@dataclass(frozen=True)
class Fetched:
    image: str
    fetched: int  # downloaded now
    cached: int  # already in the store


def fetch_inputs(ws: Workspace, images: list[str], platforms: list[str]) -> Iterator[Fetched]:
    for name in ws.select(images):
        spec = ws.spec(name)
        lock = ws.lock(spec)
        fetcher = Fetcher(Store(ws.home))
        for platform in platforms_of(spec, platforms):
            plan = plan_image(spec, lock, platform, ws.plan_options())
            fetcher.all(plan_downloads(plan))
            for pin in git_wheels(plan.runtime):
                fetcher.git_wheel(ws.home, pin, ws.mirrors)
            for comp in plan.components:
                for item in comp.context:
                    if isinstance(item.origin, FromSource):
                        item.origin.source.tree_tar(ws.context(fetcher.http, plan.epoch))
        yield Fetched(name, len(fetcher.fetched), fetcher.cached)
