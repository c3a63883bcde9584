"""What this machine needs for enginebuild, checked before a long build finds out: each check
says ok, warn or FAIL, what it found, and how to fix it. No secret is printed: registry
checks say whether credentials exist and whether the registry accepted them, never the value.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild.errors import EngineBuildError
from enginebuild.execution.sites import builder_specs
from enginebuild.io.progress import human_bytes
from enginebuild.io.store import Store
from enginebuild.oci.credentials import has_credentials
from enginebuild.oci.reference import parse_image_ref
from enginebuild.oci.registry import RegistryClient
from enginebuild.plan.stored import layer_blobs
from enginebuild.publish.records import read_records
from enginebuild.recipe.repo_settings import load_repo_settings
from enginebuild.serving.driver import has_nvidia, reach_one
from enginebuild.settings import settings
from enginebuild.trust import cachetrust
from enginebuild.usecases.collecting import catalogue_plans, store_size
from enginebuild.usecases.machinechecks import (
    Check,
    builders,
    buildkit,
    docker_client,
    emulation,
    engine,
    git,
    run_check,
    uv,
)
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    from enginebuild.workspace import Workspace

GB = 1000 ** 3
MIN_FREE = 5 * GB  # below this, even the demo's builds are at risk


def registry(repo: str, why: str) -> Check:
    ref = parse_image_ref(repo)
    name = f"registry {ref.registry}"
    creds = "credentials stored" if has_credentials(ref.registry) else "no stored credentials"
    client = RegistryClient()
    url = f"{client.base_url(ref.registry)}/v2/{ref.repository}/tags/list"
    response = client.request(ref, "GET", url)
    if response.status_code in (200, 404):
        state = "reachable" + ("" if response.status_code == 200 else " (the repository is empty)")
        return Check(name, "ok", f"{ref.repository} ({why}): {state}, {creds}")
    return Check(name, "FAIL", f"{ref.repository} ({why}): HTTP {response.status_code}, {creds}",
                 f"check the repository name and `docker login {ref.registry}`")


def store(ws: Workspace) -> Check:
    blobs, size = store_size(ws.home)
    return Check("store", "ok", f"{blobs} blob(s), {human_bytes(size)} at {ws.home} (it grows with every input "
                                "and layer made; `gc` removes what no image needs)")


def cache_keys(ws: Workspace) -> Check:
    """The key this machine signs registry-cache entries with (its public half: the private key is
    never printed), and how many keys' entries it takes."""
    key = cachetrust.signing_key(ws.home, make=False)
    trusted = cachetrust.trust(ws.home, load_repo_settings(ws.root).cache_trust).keys
    signs = f"signs with {key.public.text} ({key.origin})" if key is not None else \
        "no signing key yet (the store makes its own at its first push to a cache; or set ENGINEBUILD_CACHE_KEY)"
    return Check("cache keys", "ok", f"{signs}; takes entries signed by {len(trusted)} key(s) (docs/cache.md)")


def _free(path: Path) -> tuple[Path, int]:
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    return path, shutil.disk_usage(path).free


def disk(name: str, path: Path, need: int, need_why: str) -> Check:
    where, free = _free(path)
    detail = f"{free / GB:.1f} GB free at {where} ({need_why}: {need / GB:.1f} GB)"
    if free < need:
        return Check(name, "FAIL", detail, f"free space at {where}, or point it at a larger disk")
    return Check(name, "ok", detail)


def largest_image(ws: Workspace) -> int:
    """Bytes of the largest image built here (its layers as recorded in the store)."""

    store = Store(ws.home)
    largest = 0
    for plan in catalogue_plans(ws)[0]:
        sizes = [layer_blobs(store, node) for node in plan.runtime.layers]
        if all(sizes):
            largest = max(largest, sum(s for blobs in sizes for _, s in blobs or ()))
    return largest


def registries(ws: Workspace, extra: list[str]) -> list[tuple[str, str]]:
    """The cache and every push target this checkout has used or was asked about."""

    out: dict[str, str] = {}
    cache = settings().cache or load_repo_settings(ws.root).cache_repository
    if cache:
        out[cache] = "the cache"
    for path in sorted((ws.root / "lockfiles").glob("*.pushes.json")):
        for record in read_records(ws.root, path.name[: -len(".pushes.json")]):
            out.setdefault(str(record["repository"]), "a push target")
    for repo in extra:
        out[repo] = "asked"
    return list(out.items())


def run_checks(ws: Workspace, extra_registries: list[str], builder_values: list[str] | None = None) -> list[Check]:
    checks = [run_check("docker client", docker_client)]
    try:
        engine_check, info = engine()
    except EngineBuildError as exc:
        engine_check, info = Check("docker engine", "FAIL", exc.message, exc.hint or ""), {}
    checks.append(engine_check)
    checks.append(run_check("BuildKit", buildkit))
    targets: set[str] = set()
    for name in ws.buildable():
        try:
            targets.update(ws.spec(name).platforms)
        except EngineBuildError:
            continue
    checks += emulation(targets)
    checks += _builder_checks(ws, builder_values or [], targets)
    checks += [Check(f"spec {name}", "warn", f"does not load: {exc.message}", exc.hint or "")
               for name, exc in ws.broken().items()]
    checks.append(run_check("uv", uv))
    checks.append(run_check("git", git))
    for repo, why in registries(ws, extra_registries):
        check = run_check(f"registry {repo.split('/')[0]}", partial(registry, repo, why))
        if why == "a push target" and check.status == "FAIL":  # named only by an earlier push's record
            check = Check(check.name, "warn", f"{check.detail} (an earlier push's target, named by its record in "
                                              "lockfiles/; nothing needs it to build)", check.fix)
        checks.append(check)
    checks += node_checks(ws)
    checks.append(run_check("store", partial(store, ws)))
    checks.append(run_check("cache keys", partial(cache_keys, ws)))
    largest = largest_image(ws)
    need = max(MIN_FREE, 3 * largest)
    why = f"needs 3x the largest image built here ({largest / GB:.2f} GB), at least" if largest else "needs at least"
    checks.append(disk("disk: store", ws.home, need, why))
    root = info.get("DockerRootDir")
    if root and os.path.isdir(root):
        checks.append(disk("disk: engine", Path(root), need, why))
    elif root:
        checks.append(Check("disk: engine", "warn", f"the engine's data root {root} is not on this machine"))
    return checks


def node_checks(ws: Workspace) -> list[Check]:
    """Each node of `nodes:` in enginebuild.yaml (`serve`): its engine answers, and whether it can
    give containers GPUs (the NVIDIA runtime)."""
    try:
        entries = load_repo_settings(ws.root).nodes
    except EngineBuildError as exc:
        return [Check("nodes", "FAIL", exc.message, exc.hint or "")]
    out = []
    for entry in entries:
        name = f"node {entry.name}"
        reached, why = reach_one(entry.name, entry.address, entry.engine, entry.network)
        if why or reached is None:
            out.append(Check(name, "FAIL", f"{entry.address}: its Docker engine does not answer: {why}",
                             "start its engine, or correct `engine:` under nodes in enginebuild.yaml"))
            continue
        gpus = "the NVIDIA runtime: GPUs can be given" if has_nvidia(reached) else \
            "no NVIDIA runtime: `serve` gives it no GPUs (install the NVIDIA container toolkit for GPUs)"
        out.append(Check(name, "ok" if has_nvidia(reached) else "warn",
                         f"{entry.address}, engine {reached.engine.endpoint.describe()} answers; {gpus}"))
    return out


def _builder_checks(ws: Workspace, values: list[str], targets: set[str]) -> list[Check]:
    try:
        configured = load_repo_settings(ws.root).builders
        if not values and not configured:
            return []
        return builders(builder_specs(values, configured), targets)
    except EngineBuildError as exc:
        return [Check("builders", "FAIL", exc.message, exc.hint or "")]


def as_json(checks: list[Check]) -> JsonDoc:
    return {"ok": not any(c.failed for c in checks), "checks": [asdict(c) for c in checks]}


def table(checks: list[Check]) -> list[str]:
    width = max(len(c.name) for c in checks)
    lines = [f"{'CHECK':<{width}}  STATUS  DETAIL"]
    for c in checks:
        lines.append(f"{c.name:<{width}}  {c.status:<6}  {c.detail}")
        if c.fix and c.status != "ok":
            lines.append(f"{'':<{width}}          fix: {c.fix}")
    bad = [c for c in checks if c.failed]
    lines.append(f"{len(bad)} problem(s)" if bad else "everything enginebuild needs is here")
    return lines
