"""Where a Docker engine is, said as Docker says it: a DOCKER_HOST address (`unix://`, `tcp://`
with or without TLS, `ssh://[user@]host[:port]`) or the name of a Docker context.

An `ssh://` engine is reached as the docker CLI reaches it: `ssh … docker system dial-stdio`
on the other machine, the engine's API spoken over that program's stdin and stdout (keys,
agents and `~/.ssh/config` are ssh's business). A context is read from the CLI's own store
(`$DOCKER_CONFIG/contexts`), its TLS files included. `cli_env` is what a docker client run
for that engine needs in its environment.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import socket
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from enginebuild.errors import UserError
from enginebuild.io import proc
from enginebuild.settings import settings

SCHEMES = ("unix", "tcp", "ssh")


@dataclass(frozen=True)
class Endpoint:
    host: str  # a DOCKER_HOST address
    cert_path: str | None = None  # a folder with ca.pem, cert.pem, key.pem: TLS, verified
    context: str | None = None  # the Docker context it was read from

    def describe(self) -> str:
        shown = f"context {self.context} ({self.host})" if self.context else self.host
        return shown + (" with TLS" if self.cert_path else "")

    def cli_env(self) -> dict[str, str]:
        env = {"DOCKER_HOST": self.host, "DOCKER_CONTEXT": ""}
        if self.cert_path:
            env.update({"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": self.cert_path})
        return env

    def connection(self, timeout: float | None) -> http.client.HTTPConnection:
        parsed = urlparse(self.host)
        if parsed.scheme == "unix":
            return _UnixConnection(parsed.path, timeout)
        if parsed.scheme in ("tcp", "http", "https") and self.cert_path:
            return http.client.HTTPSConnection(parsed.hostname or "localhost", parsed.port or 2376, timeout=timeout,
                                               context=_tls_context(Path(self.cert_path)))
        if parsed.scheme in ("tcp", "http"):
            return http.client.HTTPConnection(parsed.hostname or "localhost", parsed.port or 2375, timeout=timeout)
        if parsed.scheme == "ssh":
            return _CommandConnection(ssh_command(self.host), timeout)
        raise UserError(f"Docker engine {self.host}: expected unix://, tcp:// or ssh://")


def ssh_command(host: str) -> list[str]:
    """The docker CLI's own way to reach an engine over ssh."""
    parsed = urlparse(host)
    if not parsed.hostname or parsed.path not in ("", "/"):
        raise UserError(f"Docker engine {host}: expected ssh://[USER@]HOST[:PORT]")
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
    if parsed.port:
        argv += ["-p", str(parsed.port)]
    if parsed.username:
        argv += ["-l", parsed.username]
    return argv + ["--", parsed.hostname, "docker", "system", "dial-stdio"]


def _tls_context(folder: Path) -> ssl.SSLContext:
    """The engine verified with the folder's ca.pem; a client certificate sent when there is one
    (cert.pem and key.pem), as the docker CLI does."""
    try:
        context = ssl.create_default_context(cafile=str(folder / "ca.pem"))
        if (folder / "cert.pem").is_file() or (folder / "key.pem").is_file():
            context.load_cert_chain(str(folder / "cert.pem"), str(folder / "key.pem"))
    except (OSError, ssl.SSLError) as exc:
        raise UserError(f"TLS files in {folder}: cannot be read ({exc})",
                        hint="the folder needs ca.pem, and cert.pem with key.pem for a client certificate") from None
    return context


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


class _CommandConnection(http.client.HTTPConnection):
    """HTTP over a program's stdin and stdout (one end of a socket pair is both)."""

    def __init__(self, argv: list[str], timeout: float | None):
        super().__init__("localhost", timeout=timeout)
        self.argv = argv
        self.child: subprocess.Popen[bytes] | None = None

    def connect(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            self.child = proc.spawn(self.argv, fd=theirs.fileno())
        finally:
            theirs.close()
        ours.settimeout(self.timeout)
        self.sock = ours

    def close(self) -> None:
        super().close()
        if self.child is not None:
            proc.stop(self.child, grace_s=0.2)
            self.child = None


def parse_endpoint(text: str, where: str = "--builder") -> Endpoint:
    """A DOCKER_HOST address, or a Docker context's name."""
    if "://" in text:
        scheme = text.split("://", 1)[0]
        if scheme not in SCHEMES:
            raise UserError(f"{where} {text!r}: a Docker engine is unix://, tcp:// or ssh:// (or a context's name)")
        _check_address(text, where)
        # as the docker CLI does: DOCKER_TLS_VERIFY (with DOCKER_CERT_PATH) holds for every tcp:// engine
        return Endpoint(text, settings().docker_cert_path if scheme == "tcp" else None)
    return read_context(text, where)


def _check_address(text: str, where: str) -> None:
    """An address whose host and port can be used, else a UserError naming it."""
    try:
        parsed = urlparse(text)
        port = parsed.port
    except ValueError as exc:
        raise UserError(f"{where} {text!r}: not a usable address ({exc})",
                        hint="write it as tcp://HOST:PORT, ssh://[USER@]HOST[:PORT] or unix:///PATH") from None
    if parsed.scheme in ("tcp", "ssh") and not parsed.hostname:
        raise UserError(f"{where} {text!r}: names no host", hint="write it as tcp://HOST:PORT or ssh://[USER@]HOST")
    if port == 0:
        raise UserError(f"{where} {text!r}: port 0 is not a port")


def read_context(name: str, where: str = "--builder") -> Endpoint:
    """A Docker context from the CLI's store: its docker endpoint, with its TLS files if it has them."""
    ident = hashlib.sha256(name.encode()).hexdigest()
    root = settings().docker_config / "contexts"
    meta = root / "meta" / ident / "meta.json"
    try:
        doc = json.loads(meta.read_text())
        docker = doc["Endpoints"]["docker"]
        host = str(docker["Host"])
    except FileNotFoundError:
        raise UserError(f"{where} {name!r}: no Docker context of that name (in {root})",
                        hint="create it with `docker context create NAME --docker host=ssh://USER@HOST`, or give "
                             "an address (unix://, tcp://, ssh://)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{where} {name!r}: cannot read the Docker context at {meta}: {exc}") from None
    if "://" in host:
        _check_address(host, f"{where} {name!r}: its host")
    tls = root / "tls" / ident / "docker"
    if docker.get("SkipTLSVerify"):
        raise UserError(f"{where} {name!r}: the context skips TLS verification; enginebuild does not",
                        hint="give the context the engine's CA (`docker context update --docker ca=…`)")
    cert_path = str(tls) if (tls / "ca.pem").is_file() else None
    return Endpoint(host, cert_path, name)


def local_endpoint() -> Endpoint:
    """The engine this machine's docker commands reach: DOCKER_HOST (with DOCKER_CERT_PATH when
    DOCKER_TLS_VERIFY is set), else the default socket."""
    return Endpoint(settings().docker_host, settings().docker_cert_path)
