"""A real sshd on 127.0.0.1 that lets one key in as root, with the Docker engine the far side's
`docker` commands reach set for that key; and an `ssh` on PATH that knows the host by a name,
as a user's ~/.ssh/config would (`Host spark2 ...`)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"


@dataclass
class Sshd:
    process: subprocess.Popen
    bin_dir: Path  # put first on PATH: its ssh reads this server's client configuration

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_sshd(folder: Path, alias: str, docker_host: str) -> Sshd:
    folder.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation folder
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    client = (folder / "client_key.pub").read_text().strip()
    (folder / "authorized_keys").write_text(f'environment="DOCKER_HOST={docker_host}" {client}\n')
    port = free_port()
    (folder / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitUserEnvironment yes\nStrictModes no\n"
        f"UsePAM no\nPidFile {folder / 'sshd.pid'}\n")
    host_key = (folder / "host_key.pub").read_text().strip()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key}\n")
    (folder / "ssh_config").write_text(
        f"Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  IdentityFile {folder / 'client_key'}\n"
        f"  IdentitiesOnly yes\n  UserKnownHostsFile {folder / 'known_hosts'}\n  StrictHostKeyChecking yes\n")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    real = shutil.which("ssh") or "/usr/bin/ssh"
    (bin_dir / "ssh").write_text(f"#!/bin/sh\nexec {real} -F {folder / 'ssh_config'} \"$@\"\n")
    (bin_dir / "ssh").chmod(0o755)
    process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(folder / "sshd_config")],
                               stdout=open(folder / "sshd.log", "w"), stderr=subprocess.STDOUT)
    for _ in range(100):
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited: {(folder / 'sshd.log').read_text()[-2000:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return Sshd(process, bin_dir)
        time.sleep(0.1)
    process.kill()
    raise RuntimeError("sshd did not listen")


def path_with(bin_dir: Path) -> str:
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
