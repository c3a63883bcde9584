"""BuildKit through the docker CLI: `docker buildx build` where the plugin exists, else a
client whose `docker build` still drives the engine's BuildKit with DOCKER_BUILDKIT=1.

Never the legacy builder: when neither exists, enginebuild says what to install.
"""
from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from enginebuild.errors import BuildFailed, ToolMissing

HEARTBEAT_S = 30.0


def _candidates() -> list:
    explicit = os.environ.get("ENGINEBUILD_DOCKER")
    if explicit:
        return [explicit]
    seen, out = set(), []
    for folder in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/bin"]:
        path = os.path.join(folder, "docker")
        if os.access(path, os.X_OK) and os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            out.append(path)
    return out


def _client_version(docker: str) -> tuple:
    try:
        out = subprocess.run([docker, "--version"], capture_output=True, text=True, timeout=20, check=False).stdout
    except OSError:
        return ()
    match = re.search(r"version (\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else ()


def _has_buildx(docker: str) -> bool:
    try:
        return subprocess.run([docker, "buildx", "version"], capture_output=True, timeout=20,
                              check=False).returncode == 0
    except OSError:
        return False


@dataclass(frozen=True)
class Builder:
    docker: str
    kind: str  # "buildx" or "buildkit"
    builder_name: str | None = None

    def describe(self) -> str:
        if self.kind == "buildx":
            return f"{self.docker} buildx build" + (f" --builder {self.builder_name}" if self.builder_name else "")
        return f"DOCKER_BUILDKIT=1 {self.docker} build"

    def command(self, *, tag: str, platform: str, labels: dict, secret_files: dict) -> tuple:
        if self.kind == "buildx":
            args = [self.docker, "buildx", "build", "--load"]
            if self.builder_name:
                args += ["--builder", self.builder_name]
        else:
            args = [self.docker, "build"]
        args += ["--progress=plain", "--platform", platform, "-t", tag, "-f", "Dockerfile"]
        for key, value in sorted(labels.items()):
            args += ["--label", f"{key}={value}"]
        for ident, path in sorted(secret_files.items()):
            args += ["--secret", f"id={ident},src={path}"]
        args.append("-")
        env = dict(os.environ)
        env["DOCKER_BUILDKIT"] = "1"
        return args, env


def _detection_key(candidates: list) -> str:
    import json

    stats = []
    for path in candidates:
        try:
            st = os.stat(path)
            stats.append([path, st.st_mtime_ns, st.st_size, st.st_ino])
        except OSError:
            stats.append([path])
    plugins = os.path.expanduser("~/.docker/cli-plugins")
    for folder in (plugins, "/usr/libexec/docker/cli-plugins", "/usr/lib/docker/cli-plugins",
                   "/usr/local/lib/docker/cli-plugins"):
        try:
            stats.append([folder, os.stat(folder).st_mtime_ns])
        except OSError:
            pass
    return json.dumps(stats)


def detect_builder(builder_name: str | None = None) -> Builder:
    """The BuildKit client to use; the answer is remembered until a docker binary or plugin folder changes."""
    import json

    from enginebuild.atomic import write_atomic
    from enginebuild.home import home

    candidates = _candidates()
    builder_name = builder_name or os.environ.get("BUILDX_BUILDER") or None
    record = home() / "builder.json"
    key = _detection_key(candidates)
    try:
        known = json.loads(record.read_text())
        if known.get("key") == key:
            return Builder(known["docker"], known["kind"], builder_name if known["kind"] == "buildx" else None)
    except (OSError, ValueError, KeyError):
        pass
    builder = _detect(candidates, builder_name)
    try:
        write_atomic(record, json.dumps({"key": key, "docker": builder.docker, "kind": builder.kind}).encode())
    except OSError:
        pass
    return builder


def _detect(candidates: list, builder_name: str | None) -> Builder:
    if not candidates:
        raise ToolMissing("no docker client on PATH", hint="install docker (see README: set-up)")
    for docker in candidates:
        if _has_buildx(docker):
            return Builder(docker, "buildx", builder_name)
    for docker in candidates:
        version = _client_version(docker)
        if version and version < (23, 0):
            return Builder(docker, "buildkit")
    found = ", ".join(f"{c} ({'.'.join(map(str, _client_version(c))) or '?'})" for c in candidates)
    raise ToolMissing(
        f"no BuildKit-capable docker client: found {found}, none has the buildx plugin, and "
        "clients from 23.0 on no longer drive BuildKit without it",
        hint="install the buildx plugin (Debian: docker-buildx; or docker's buildx release), "
             "or set ENGINEBUILD_DOCKER to a client that has it; enginebuild never uses the legacy builder")


class Redactor:
    """Removes secret values from anything enginebuild prints or logs."""

    def __init__(self, secrets):
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return text


def run_build(builder: Builder, *, context_file: Path, tag: str, platform: str, labels: dict,
              secrets: dict, log_path: Path, what: str, verbose: bool = False) -> float:
    """Run one stage build; raise BuildFailed with the builder's output on failure."""
    redact = Redactor(secrets.values())
    log_path.parent.mkdir(parents=True, exist_ok=True)
    secret_dir = tempfile.mkdtemp(prefix="enginebuild-secrets-")
    try:
        os.chmod(secret_dir, 0o700)
        secret_files = {}
        for ident, value in secrets.items():
            path = Path(secret_dir) / ident
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(value)
            secret_files[ident] = path
        args, env = builder.command(tag=tag, platform=platform, labels=labels, secret_files=secret_files)
        tail: collections.deque = collections.deque(maxlen=60)
        start = time.monotonic()
        done = threading.Event()

        def heartbeat():
            while not done.wait(HEARTBEAT_S):
                print(f"    ... still building {what} ({time.monotonic() - start:.0f}s)", file=sys.stderr, flush=True)

        ticker = threading.Thread(target=heartbeat, daemon=True)
        with open(context_file, "rb") as stdin, open(log_path, "w") as log:
            try:
                proc = subprocess.Popen(args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
            except OSError as exc:
                raise ToolMissing(f"cannot run {args[0]}: {exc}") from None
            ticker.start()
            try:
                for raw in proc.stdout:
                    line = redact(raw.decode("utf-8", "replace").rstrip("\n"))
                    log.write(line + "\n")
                    tail.append(line)
                    if verbose:
                        print(f"    {line}", file=sys.stderr, flush=True)
                code = proc.wait()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            finally:
                done.set()
        elapsed = time.monotonic() - start
        if code != 0:
            from enginebuild.engine_api import EngineAPI, docker_host

            if not EngineAPI().ping():
                raise BuildFailed(f"the Docker engine at {docker_host()} stopped answering while stage {what} was "
                                  f"building ({elapsed:.1f}s in); nothing was recorded for that stage",
                                  hint="start the engine and run the same command again: stages already built are kept")
            shown = "\n    ".join(tail)
            raise BuildFailed(f"stage {what} failed after {elapsed:.1f}s (builder exit {code}); builder output:\n    {shown}",
                              hint=f"full log: {log_path}")
        return elapsed
    finally:
        shutil.rmtree(secret_dir, ignore_errors=True)
