"""`doctor`'s checks of this machine's own tools, each ok, warn or FAIL with its fix: the docker
client, BuildKit, the engine, the builders named (what each builds natively), emulation of the
catalogue's foreign platforms (binfmt_misc), uv and git. diagnosing.py runs them with the checks
of the workspace (store, disk, registries, nodes) and prints them as one table."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from enginebuild.core.platforms import HOST, Platform
from enginebuild.errors import EngineBuildError
from enginebuild.execution.buildkit import candidates, client_version, detect_builder
from enginebuild.execution.sites import BuilderSpec, native_platforms
from enginebuild.io import proc
from enginebuild.lock.python import uv_binary
from enginebuild.oci.engine import Engine
from enginebuild.settings import settings
from enginebuild.wire import JsonDoc

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


def run_check(name: str, probe: Callable[[], Check]) -> Check:
    """The check a probe returns, or the FAIL its error names."""
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
