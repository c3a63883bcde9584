"""What this machine needs for enginebuild, checked before a long build finds out: each check
says ok, warn or FAIL, what it found, and how to fix it. No secret is printed: registry
checks say whether credentials exist and whether the registry accepted them, never the value.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild.core.platforms import HOST, Platform
from enginebuild.errors import EngineBuildError
from enginebuild.execution.buildkit import candidates, client_version, detect_builder
from enginebuild.execution.sites import BuilderSpec, builder_specs, native_platforms
from enginebuild.io import proc
from enginebuild.io.progress import human_bytes
from enginebuild.io.store import Store
from enginebuild.lock.python import uv_binary
from enginebuild.oci.credentials import has_credentials
from enginebuild.oci.engine import Engine
from enginebuild.oci.reference import parse_image_ref
from enginebuild.oci.registry import RegistryClient
from enginebuild.plan.stored import layer_blobs
from enginebuild.publish.records import read_records
from enginebuild.recipe.repo_settings import load_repo_settings
from enginebuild.serving.driver import has_nvidia, reach_one
from enginebuild.settings import settings
from enginebuild.trust import cachetrust
from enginebuild.usecases.collecting import catalogue_plans, store_size
from enginebuild.wire import JsonDoc

if TYPE_CHECKING:
    from enginebuild.workspace import Workspace

GB = 1000 ** 3
MIN_FREE = 5 * GB  # below this, even the demo's builds are at risk
BINFMT = Path("/proc/sys/fs/binfmt_misc")


@dataclass
class Check:
    name: str
    status: str  # ok | warn | FAIL
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"


def _run(name: str, probe: Callable[[], Check]) -> Check:
    try:
        return probe()
    except EngineBuildError as exc:
        return Check(name, "FAIL", exc.message, exc.hint or "")


def docker_client() -> Check:
    found = candidates()
    if not found:
        return Check("docker client", "FAIL", "no docker client found (PATH, or ENGINEBUILD_DOCKER)",
                     "install docker (bash scripts/setup.sh), or set ENGINEBUILD_DOCKER to a client")
    versions = {c: ".".join(map(str, client_version(c))) for c in found}
    detail = ", ".join(f"{c} {v or '(does not run)'}" for c, v in versions.items())
    if not any(versions.values()):
        return Check("docker client", "FAIL", detail, "install docker (bash scripts/setup.sh), or point "
                                                      "ENGINEBUILD_DOCKER at a client that runs")
    return Check("docker client", "ok", detail)


def buildkit() -> Check:
    return Check("BuildKit", "ok", detect_builder().describe())


def engine() -> tuple[Check, JsonDoc]:
    eng = Engine(timeout=10)
    if not eng.ping():
        return Check("docker engine", "FAIL", f"nothing answers at {settings().docker_host}",
                     "start dockerd (bash scripts/setup.sh), or set DOCKER_HOST to a running engine"), {}
    info = eng.info()
    return Check("docker engine", "ok", f"{info.get('ServerVersion', '?')} at {settings().docker_host}, "
                                        f"{info.get('Driver', '?')} storage"), info


def builders(specs: list[BuilderSpec], targets: set[str]) -> list[Check]:
    """Every builder named (enginebuild.yaml or --builder): does it answer, what it builds natively,
    and whether each platform the catalogue targets has a native builder."""

    out: list[Check] = []
    native: set[str] = set()
    for spec in specs:
        name = f"builder {spec.name}"
        eng = Engine(spec.endpoint, timeout=15)
        why = eng.unreachable()
        if why is not None:
            out.append(Check(name, "FAIL", f"nothing answers at {spec.endpoint.describe()} ({why})",
                             "start its engine; check `docker -H ADDRESS version` (ssh: keys, and docker on the "
                             "other machine); a build skips it and says so"))
            continue
        info = eng.info()
        platforms = tuple(spec.platforms) or native_platforms(eng)
        native.update(platforms)
        how = "stated" if spec.platforms else "read from the engine"
        out.append(Check(name, "ok", f"{info.get('ServerVersion', '?')} at {spec.endpoint.describe()}, "
                                     f"{info.get('NCPU', '?')} CPUs, builds {', '.join(platforms)} natively ({how})"))
    for target in sorted(targets - native):
        out.append(Check(f"builders for {target}", "warn", "no builder builds it natively: it will be emulated",
                         "add a builder of that architecture (builders: in enginebuild.yaml)"))
    return out


def emulation(platforms: Iterable[str]) -> list[Check]:
    out = []
    for target in sorted(set(platforms)):
        name, machine = f"platform {target}", Platform.parse(target)
        if machine.arch == HOST.arch:
            out.append(Check(name, "ok", "native"))
            continue
        entry = BINFMT / f"qemu-{machine.qemu}"
        if not (BINFMT / "register").exists():
            out.append(Check(name, "FAIL", f"{BINFMT} is not mounted: foreign binaries cannot run here",
                             "mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc (bash scripts/setup.sh)"))
            continue
        try:
            text = entry.read_text()
        except OSError:
            out.append(Check(name, "FAIL", f"no {entry.name} handler registered with binfmt_misc",
                             "install qemu-user-static and binfmt-support (bash scripts/setup.sh)"))
            continue
        flags = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("flags:")), "")
        if not text.startswith("enabled"):
            out.append(Check(name, "FAIL", f"{entry.name} is registered but disabled",
                             f"update-binfmts --enable {entry.name}"))
        elif "F" not in flags:
            out.append(Check(name, "FAIL", f"{entry.name} lacks the fix-binary flag (F): containers cannot find "
                                           "the emulator", "reinstall qemu-user-static (its handlers set F)"))
        else:
            out.append(Check(name, "ok", f"emulated by {entry.name} (flags {flags})"))
    return out


def tool(name: str, find: Callable[[], str | None], version_args: list[str]) -> Check:
    path = find()
    if not path:
        return Check(name, "FAIL", f"{name} not found", "bash scripts/setup.sh (pip install -r requirements.txt)")
    out = proc.run([path, *version_args], check=False, timeout=20)
    return Check(name, "ok" if out.returncode == 0 else "FAIL", f"{path}: {(out.out or out.err).strip()[:60]}")


def uv() -> Check:
    return tool("uv", uv_binary, ["--version"])


def git() -> Check:
    return tool("git", lambda: shutil.which("git"), ["--version"])


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
    checks = [_run("docker client", docker_client)]
    try:
        engine_check, info = engine()
    except EngineBuildError as exc:
        engine_check, info = Check("docker engine", "FAIL", exc.message, exc.hint or ""), {}
    checks.append(engine_check)
    checks.append(_run("BuildKit", buildkit))
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
    checks.append(_run("uv", uv))
    checks.append(_run("git", git))
    for repo, why in registries(ws, extra_registries):
        check = _run(f"registry {repo.split('/')[0]}", partial(registry, repo, why))
        if why == "a push target" and check.status == "FAIL":  # named only by an earlier push's record
            check = Check(check.name, "warn", f"{check.detail} (an earlier push's target, named by its record in "
                                              "lockfiles/; nothing needs it to build)", check.fix)
        checks.append(check)
    checks += node_checks(ws)
    checks.append(_run("store", partial(store, ws)))
    checks.append(_run("cache keys", partial(cache_keys, ws)))
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
