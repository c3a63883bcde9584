"""A second, independent Docker engine on this machine: a fresh CI runner with an empty store.

It gets its own bridge: an engine started with --bridge=none deletes the host's docker0,
which breaks the first engine's containers.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Engine:
    host: str
    folder: Path
    process: subprocess.Popen
    bridge: str
    run_dir: Path

    @property
    def env(self) -> dict:
        return {"DOCKER_HOST": self.host}

    def stop(self, keep_data: bool = False) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)
        unmount_below(self.run_dir)
        unmount_below(self.folder)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        if not keep_data:
            shutil.rmtree(self.folder, ignore_errors=True)


def unmount_below(folder: Path) -> None:
    """A stopped engine can leave overlay and netns mounts behind; they would pin its folders.
    Mounts can be stacked on one point (an engine restarted on the same data), so repeat."""
    prefix = str(Path(folder).resolve()) + "/"
    for _ in range(10):
        with open("/proc/mounts") as handle:
            points = [line.split()[1] for line in handle if line.split()[1].startswith(prefix)]
        if not points:
            return
        for point in sorted(points, key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)


def worker_number() -> int:
    """This test process's number among pytest-xdist's workers (gw0 → 0); 0 without xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else 0


def start_engine(folder: Path, index: int = 2, cpus: str | None = None, extra: tuple = (),
                 binds: tuple[tuple[Path, Path], ...] = ()) -> Engine:
    """`cpus` (taskset's list, "0" or "1"): the engine, and every build it runs, on those CPUs only;
    `extra`: more dockerd arguments (another -H, TLS); `binds`: (SOURCE, TARGET) folders this engine
    sees at TARGET in a mount namespace of its own (another machine's disk: the same path, other files)."""
    folder.mkdir(parents=True, exist_ok=True)
    worker = worker_number()  # engines of parallel test workers: their own bridges and subnets
    bridge = f"ebt{worker}x{index}x{os.getpid() % 10000}"[:15]
    subprocess.run(["ip", "link", "add", bridge, "type", "bridge"], check=True, capture_output=True)
    subprocess.run(["ip", "addr", "add", f"172.{31 - worker}.{240 + index}.1/24", "dev", bridge], check=True,
                   capture_output=True)
    subprocess.run(["ip", "link", "set", bridge, "up"], check=True, capture_output=True)
    # sockets live under a short path: a unix socket path may not exceed 107 bytes
    run_dir = Path(tempfile.mkdtemp(prefix="ebe-", dir="/tmp"))
    sock = run_dir / "docker.sock"
    log = open(folder / "dockerd.log", "w")
    pin = ["taskset", "-c", cpus] if cpus else []
    if binds:
        mounts = " && ".join(f"mount --bind '{source}' '{target}'" for source, target in binds)
        pin = ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{mounts} && exec "$@"', "sh", *pin]
    process = subprocess.Popen(
        [*pin, "dockerd", "-H", f"unix://{sock}", "--data-root", str(folder / "data"), "--exec-root", str(run_dir / "exec"),
         "--pidfile", str(run_dir / "docker.pid"), f"--bridge={bridge}", "--iptables=false", "--ip-masq=false", *extra],
        stdout=log, stderr=subprocess.STDOUT)
    host = f"unix://{sock}"
    for _ in range(120):
        if process.poll() is not None:
            raise RuntimeError(f"second dockerd exited: {(folder / 'dockerd.log').read_text()[-2000:]}")
        if subprocess.run(["docker", "-H", host, "version"], capture_output=True).returncode == 0:
            return Engine(host, folder, process, bridge, run_dir)
        time.sleep(0.5)
    process.kill()
    raise RuntimeError("second dockerd did not answer")


def tls_files(folder: Path) -> tuple[Path, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate (openssl): returns the
    server's folder (ca.pem, server-cert.pem, server-key.pem) and the client's (ca.pem, cert.pem, key.pem)."""
    server, client = folder / "server", folder / "client"
    server.mkdir(parents=True)
    client.mkdir(parents=True)

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=enginebuild test CA")
    for who, name, usage, extra in (("server", "127.0.0.1", "serverAuth", "subjectAltName=IP:127.0.0.1\n"),
                                     ("client", "client", "clientAuth", "")):
        ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}-key.pem", "-out", f"{who}.csr",
            "-subj", f"/CN={name}")
        (folder / f"{who}.ext").write_text(f"{extra}extendedKeyUsage={usage}\n")
        ssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial",
            "-out", f"{who}-cert.pem", "-days", "2", "-extfile", f"{who}.ext")
    for target in (server, client):
        shutil.copy(folder / "ca.pem", target / "ca.pem")
    shutil.copy(folder / "server-cert.pem", server / "server-cert.pem")
    shutil.copy(folder / "server-key.pem", server / "server-key.pem")
    shutil.copy(folder / "client-cert.pem", client / "cert.pem")
    shutil.copy(folder / "client-key.pem", client / "key.pem")
    return server, client
