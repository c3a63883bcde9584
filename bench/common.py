"""Shared helpers for the benchmarks: timing commands, scratch workspaces, the result table."""
from __future__ import annotations

import atexit
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def share_cache_key() -> None:
    """Every runner of a benchmark (each a fresh home) signs its registry-cache entries with one key
    and trusts it, as the jobs of one CI workflow share a secret (ENGINEBUILD_CACHE_KEY)."""
    if os.environ.get("ENGINEBUILD_CACHE_KEY"):
        return
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = Path(tempfile.mkdtemp(prefix="eb-bench-key-")) / "cache-signing.pem"
    atexit.register(shutil.rmtree, path.parent, True)  # a throw-away private key: not left in /tmp
    path.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    path.chmod(0o600)
    os.environ["ENGINEBUILD_CACHE_KEY"] = str(path)


share_cache_key()


@dataclass
class Row:
    name: str
    ours: float
    baseline: float
    unit: str
    ours_command: str
    baseline_command: str
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline if self.baseline else float("nan")


def run(args, cwd=None, env=None, check=True, stdin=None) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    # enginebuild runs as Python usually does, with its bytecode cache (some sandboxes turn it off)
    full.pop("PYTHONDONTWRITEBYTECODE", None)
    full.update(env or {})
    proc = subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True, stdin=stdin)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def timed(args, repeat=1, **kw) -> float:
    """Median wall time of a command, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run(args, **kw)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def eb(workspace: Path, *args) -> list:
    """The enginebuild command line of a workspace (its own BUILD.py: its root is that folder)."""
    return [PY, str(Path(workspace) / "BUILD.py"), *args]


def scratch_workspace(name: str) -> Path:
    """A copy of the recipe repository (images, patches, lockfiles) to edit without touching the checkout."""
    folder = Path(tempfile.mkdtemp(prefix=f"eb-bench-{name}-"))
    for part in ("images", "patches", "lockfiles", "src"):
        shutil.copytree(ROOT / part, folder / part, symlinks=True)
    shutil.copy(ROOT / "BUILD.py", folder / "BUILD.py")
    return folder


def print_table(rows) -> None:
    print()
    print(f"{'benchmark':<46} {'enginebuild':>12} {'baseline':>12} {'ratio':>8}")
    for row in rows:
        print(f"{row.name:<46} {row.ours:>11.3f}{row.unit[0]} {row.baseline:>11.3f}{row.unit[0]} {row.ratio:>8.3f}"
              + (f"  {row.note}" if row.note else ""))
    print()
    for row in rows:
        print(f"{row.name}:\n  enginebuild: {row.ours_command}\n  baseline:    {row.baseline_command}")
