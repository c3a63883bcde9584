"""The plans a push sends are built and intact: a layer missing from the store is refused (naming
the `--set` values of the last build when those were other inputs), a layer damaged in the store
since its build is made again as `image` would; the bytes of a layer a registry stood in are
fetched when the pusher needs them."""

from __future__ import annotations

from collections.abc import Callable

from enginebuild.errors import BuildFailed, command
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.oci.image import Layer
from enginebuild.plan.model import ImagePlan
from enginebuild.plan.stored import layer_blobs
from enginebuild.registrycache import substitutes
from enginebuild.state.lastsettings import last_settings
from enginebuild.usecases.building import build_platform
from enginebuild.usecases.buildrequest import BuildRequest
from enginebuild.workspace import Workspace


def ready_to_push(ws: Workspace, name: str, plans: list[ImagePlan], to: str) -> None:
    """Each plan's layers in the store, intact (a damaged one made again); else refused."""
    store = Store(ws.home)
    for plan in plans:
        missing = [n.name for n in plan.runtime.layers if layer_blobs(store, n) is None]
        if missing:
            last = last_settings(store, name)
            if last and tuple(last) != ws.overrides:  # built with other --set: a push is of the image its inputs make
                given = " ".join(f"--set {v}" for v in last)
                raise BuildFailed(f"{name} ({plan.platform}) is not built at these inputs: its last build here was "
                                  f"given {given}, which changes its inputs ({missing[0]} is another layer)",
                                  hint=f"push with the same values: `{command()} push {name} {given} --to {to}`")
            raise BuildFailed(f"{name} ({plan.platform}) is not built at its current inputs ({missing[0]} is missing)",
                              hint=f"run `{command()} image {name}` first, or `image {name} --push --to {to}`")
        damaged = [n.name for n in plan.runtime.layers if not substitutes.substituted(store, n)
                   and not all(store.intact(sha, n.name) for sha, _ in layer_blobs(store, n) or ())]
        if damaged:  # built before, damaged in the store since: made again now, as `image` would
            output().say(f"  {name} ({plan.platform}): {', '.join(damaged)} damaged in the store; making it again")
            spec = ws.spec(name)
            build_platform(ws, spec, plan, BuildRequest(), None, tuple(spec.platforms))


def fetcher(store: Store, plan: ImagePlan) -> Callable[[Layer], None]:
    """For the pusher: fetch the bytes of a layer a registry stood in (to compress them here)."""
    by_blob = {sha: node for node in plan.runtime.layers for sha, _ in layer_blobs(store, node) or ()}

    def fetch(layer: Layer) -> None:
        substitutes.realize(store, by_blob[str(layer.blob)])

    return fetch
