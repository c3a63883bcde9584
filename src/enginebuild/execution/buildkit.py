"""BuildKit through the docker CLI: `docker buildx build` where the plugin exists, else a client
older than 23.0 whose `docker build` still drives the engine's BuildKit with DOCKER_BUILDKIT=1.

Never the legacy builder: when neither exists, enginebuild says what to install. Builds run
through the subprocess seam and are stopped when enginebuild is interrupted.
"""

from __future__ import annotations

import collections
import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from enginebuild.errors import BuilderLost, BuildFailed, ToolMissing
from enginebuild.execution.secretscan import encodings
from enginebuild.io import faults, proc
from enginebuild.io.files import temp_path, write_atomic
from enginebuild.io.progress import BuildLine, output
from enginebuild.settings import settings


def candidates() -> list[str]:
    explicit = settings().docker_client
    if explicit:
        return [explicit]
    seen, out = set(), []
    for folder in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/bin"]:
        path = os.path.join(folder, "docker")
        if os.access(path, os.X_OK) and os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            out.append(path)
    return out


def client_version(docker: str) -> tuple[int, ...]:
    try:
        out = proc.run([docker, "--version"], check=False, timeout=20).out
    except Exception:  # a broken client: not a candidate
        return ()
    match = re.search(r"version (\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else ()


def has_buildx(docker: str) -> bool:
    try:
        return proc.run([docker, "buildx", "version"], check=False, timeout=20).returncode == 0
    except Exception:  # not runnable: no buildx
        return False


@dataclass(frozen=True)
class Builder:
    docker: str
    kind: str  # "buildx" or "buildkit"
    builder_name: str | None = None
    no_cache: bool = False  # reproduce: nothing from the builder's own cache
    env: tuple[tuple[str, str], ...] = ()  # where its engine is (DOCKER_HOST, ...), for another machine's
    engine: str = ""  # that engine, as messages name it

    def describe(self) -> str:
        if self.kind == "buildx":
            return f"{self.docker} buildx build" + (f" --builder {self.builder_name}" if self.builder_name else "")
        return f"DOCKER_BUILDKIT=1 {self.docker} build"

    def command(self, *, tag: str, platform: str, secrets: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """The client's command line and environment. Secrets reach BuildKit through the client's
        environment (`--secret id=X,env=VAR`): no file ever holds a value, so a killed run leaves none."""
        if self.kind == "buildx":
            args = [self.docker, "buildx", "build", "--load"]
            if self.builder_name:
                args += ["--builder", self.builder_name]
        else:
            args = [self.docker, "build"]
        args += ["--progress=plain", "--platform", platform, "-t", tag, "-f", "Dockerfile"]
        if self.no_cache:
            args.append("--no-cache")
        env = {"DOCKER_BUILDKIT": "1", **dict(self.env)}
        for index, (ident, value) in enumerate(sorted(secrets.items())):
            variable = f"ENGINEBUILD_SECRET_{index}"
            args += ["--secret", f"id={ident},env={variable}"]
            env[variable] = value
        args.append("-")
        return args, env


def _detection_key(found: list[str]) -> str:
    stats: list[list[object]] = []
    for path in found:
        try:
            st = os.stat(path)
            stats.append([path, st.st_mtime_ns, st.st_size, st.st_ino])
        except OSError:
            stats.append([path])
    for folder in (os.path.expanduser("~/.docker/cli-plugins"), "/usr/libexec/docker/cli-plugins",
                   "/usr/lib/docker/cli-plugins", "/usr/local/lib/docker/cli-plugins"):
        try:
            stats.append([folder, os.stat(folder).st_mtime_ns])
        except OSError:
            pass
    return json.dumps(stats)


def detect_builder(builder_name: str | None = None) -> Builder:
    """The BuildKit client to use; remembered until a docker binary or plugin folder changes."""
    found = candidates()
    builder_name = builder_name or settings().buildx_builder
    record = settings().home / "builder.json"
    key = _detection_key(found)
    try:
        known = json.loads(record.read_text())
        if known.get("key") == key:
            return Builder(known["docker"], known["kind"], builder_name if known["kind"] == "buildx" else None)
    except (OSError, ValueError, KeyError):
        pass
    builder = _detect(found, builder_name)
    try:
        write_atomic(record, json.dumps({"key": key, "docker": builder.docker, "kind": builder.kind}).encode())
    except OSError:
        pass
    return builder


def _detect(found: list[str], builder_name: str | None) -> Builder:
    if not found:
        raise ToolMissing("no docker client on PATH", hint="install docker (see README: set-up)")
    for docker in found:
        if has_buildx(docker):
            return Builder(docker, "buildx", builder_name)
    for docker in found:
        version = client_version(docker)
        if version and version < (23, 0):
            return Builder(docker, "buildkit")
    listed = ", ".join(f"{c} ({'.'.join(map(str, client_version(c))) or '?'})" for c in found)
    raise ToolMissing(
        f"no BuildKit-capable docker client: found {listed}, none has the buildx plugin, and "
        "clients from 23.0 on no longer drive BuildKit without it",
        hint="install the buildx plugin (Debian: docker-buildx; or docker's buildx release), "
             "or set ENGINEBUILD_DOCKER to a client that has it; enginebuild never uses the legacy builder")


class Redactor:
    """Removes secret values from anything enginebuild prints or logs: as written, and in every
    encoding the secret scan looks for (base64 at any alignment, URL- and JSON-escaped)."""

    def __init__(self, secrets: list[str]):
        forms = {s for s in secrets if s and len(s) >= 4}
        forms |= {e.decode("ascii", "replace") for s in secrets if s and len(s) >= 6 for e in encodings(s)}
        self.secrets = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return text


@dataclass
class BuildResult:
    seconds: float
    tail: list[str]


def run_build(builder: Builder, *, context: Callable[[IO[bytes]], None], tag: str, platform: str,
              secrets: dict[str, str], log_path: Path, label: str, expected_s: float | None,
              verbose: bool = False, engine_alive: Callable[[], bool] = lambda: True, image: str = "") -> BuildResult:
    """Run one BuildKit build; raise BuildFailed with the builder's output on failure. Its output
    is streamed with -v, and always in plain progress (CI), each line saying whose it is (the
    image, platform and component or layer)."""
    redact = Redactor(list(secrets.values()))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    context_file = temp_path(settings().home / "tmp", "context")
    context_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(context_file, "xb") as context_handle:
            context(context_handle)
        args, env = builder.command(tag=tag, platform=platform, secrets=secrets)
        tail: collections.deque[str] = collections.deque(maxlen=60)
        line = BuildLine(output(), label, expected_s)
        start = time.monotonic()
        done = threading.Event()

        def tick() -> None:
            while not done.wait(1.0):
                line.tick()

        ticker = threading.Thread(target=tick, daemon=True)
        with open(context_file, "rb") as stdin, open(log_path, "w") as log, \
                proc.stream(args, env=env, stdin=stdin) as child:
            ticker.start()
            announced = False
            try:
                assert child.stdout is not None
                for raw in child.stdout:
                    text = redact(raw.decode("utf-8", "replace").rstrip("\n"))
                    log.write(text + "\n")
                    tail.append(text)
                    if verbose or not output().live:  # plain: every step's output, as Docker's plain shows it
                        output().say(f"    {image + ' ' if image else ''}{label} | {text}")
                    if not verbose:
                        line.feed(text)
                    if not announced and re.match(r"#\d+ \[.*\] RUN", text):
                        announced = True
                        faults.reached("buildkit.running", label.partition("] ")[2] or label)
                code = child.wait()
            finally:
                done.set()
                line.close()
        elapsed = time.monotonic() - start
        if code != 0:
            if not engine_alive():
                raise BuilderLost(f"the Docker engine at {builder.engine or settings().docker_host} stopped answering "
                                  f"while {label} was building ({elapsed:.1f}s in); nothing was recorded for it",
                                  hint="start the engine and run the same command again: what was built is kept")
            shown = "\n    ".join(tail)
            raise BuildFailed(f"{label} failed after {elapsed:.1f}s (builder exit {code}); builder output:\n    {shown}",
                              hint=f"full log: {log_path}")
        return BuildResult(elapsed, list(tail))
    finally:
        context_file.unlink(missing_ok=True)
