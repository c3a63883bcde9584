"""Every environment variable enginebuild reads, read in one place and documented here.

Standard library only: the no-op fast path imports this module.

| variable | meaning |
|---|---|
| `ENGINEBUILD_HOME` | machine-local state (store, records, mirrors); default `$XDG_CACHE_HOME/enginebuild` |
| `DOCKER_HOST` | the Docker engine (`unix://`, `tcp://`, `ssh://`); default `unix:///var/run/docker.sock` |
| `DOCKER_TLS_VERIFY`, `DOCKER_CERT_PATH` | TLS to a `tcp://` engine, verified with that folder's `ca.pem`, `cert.pem`, `key.pem` |
| `ENGINEBUILD_DOCKER` | the docker client to drive BuildKit with (default: detected on PATH) |
| `BUILDX_BUILDER` | the buildx builder to use, where buildx is present |
| `ENGINEBUILD_CACHE` | the registry-backed cache repository (as `--cache`) |
| `ENGINEBUILD_CACHE_READONLY` | `1`: pull from the cache, never push to it |
| `ENGINEBUILD_CACHE_KEY` | the key signing cache entries pushed here: a PEM file, the PEM or its body (never printed) |
| `ENGINEBUILD_CACHE_TRUST` | public keys (`ed25519:BASE64`, space-separated) whose cache entries are taken |
| `ENGINEBUILD_GIT_MIRRORS` | `UPSTREAM=WHERE` pairs (space-separated): git sources fetched from WHERE (a path: from here) |
| `ENGINEBUILD_INSECURE_REGISTRIES` | comma-separated registries spoken to over plain HTTP (loopback always is) |
| `ENGINEBUILD_UPLOAD_DEADLINE` | seconds a blob upload may take in all, its fresh starts included (default 600) |
| `ENGINEBUILD_HTTP_BACKOFF` | base of the exponential backoff between HTTP retries, in seconds (default 0.5) |
| `SOURCE_DATE_EPOCH` | time stamp of every layer entry (default 1) and the image's `created` (default: the lock's `created`) |
| `DOCKER_CONFIG` | where registry credentials are read (`config.json`), as the Docker CLI does |
| `ENGINEBUILD_FAULT` | tests only: `NAME[:DETAIL]=kill|announce|stall`, comma-separated: act at a named point (see io/faults.py) |
| `NO_COLOR`, `CI` | plain progress lines instead of a live terminal line |
| `ENGINEBUILD_PROGRESS_EVERY` | seconds between plain progress lines (default 10) |
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
ENGINE_API_VERSION = "v1.41"


@dataclass(frozen=True)
class Settings:
    home: Path
    docker_host: str
    docker_cert_path: str | None
    docker_client: str | None
    buildx_builder: str | None
    cache: str | None
    cache_readonly: bool
    cache_key: str | None = field(repr=False)  # may be the key itself: never in a repr
    cache_trust: tuple[str, ...]
    git_mirrors: tuple[tuple[str, str], ...]  # (upstream URL, or a prefix ending in /; where to fetch it from)
    insecure_registries: frozenset[str]
    http_backoff_s: float
    upload_deadline_s: float
    source_date_epoch: int | None
    docker_config: Path
    fault: str | None
    plain_progress: bool
    progress_every_s: float


def _home(environ: dict[str, str]) -> Path:
    explicit = environ.get("ENGINEBUILD_HOME")
    if explicit:
        return Path(explicit)
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "enginebuild"


def _epoch(text: str | None) -> int | None:
    if text is None or not text.strip():
        return None
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def _seconds(text: str | None, default: float) -> float:
    try:
        return max(0.0, float(text)) if text else default
    except ValueError:
        return default


def mirror_place(base: Path, at: str) -> str:
    """A git mirror's place: a URL as given, a path made absolute from `base` (the current folder for
    ENGINEBUILD_GIT_MIRRORS, the checkout's root for enginebuild.yaml) when it is read, so that git
    finds it from whatever folder it runs in."""
    if "://" in at or (":" in at.split("/", 1)[0] and "@" in at):
        return at
    return at if at.startswith("/") else os.path.normpath(os.path.join(os.path.abspath(base), os.path.expanduser(at)))


def read_settings(environ: dict[str, str] | None = None) -> Settings:
    env = dict(os.environ if environ is None else environ)
    insecure = frozenset(h.strip() for h in env.get("ENGINEBUILD_INSECURE_REGISTRIES", "").split(",") if h.strip())
    docker_config = env.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    return Settings(
        home=_home(env),
        docker_host=env.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST,
        docker_cert_path=(env.get("DOCKER_CERT_PATH") or os.path.join(os.path.expanduser("~"), ".docker"))
        if env.get("DOCKER_TLS_VERIFY") else None,
        docker_client=env.get("ENGINEBUILD_DOCKER") or None,
        buildx_builder=env.get("BUILDX_BUILDER") or None,
        cache=env.get("ENGINEBUILD_CACHE") or None,
        cache_readonly=env.get("ENGINEBUILD_CACHE_READONLY", "").lower() in ("1", "true", "yes"),
        cache_key=env.get("ENGINEBUILD_CACHE_KEY") or None,
        cache_trust=tuple(t for t in env.get("ENGINEBUILD_CACHE_TRUST", "").replace(",", " ").split() if t),
        git_mirrors=tuple((item.split("=", 1)[0], mirror_place(Path.cwd(), item.split("=", 1)[1]))
                          for item in env.get("ENGINEBUILD_GIT_MIRRORS", "").split() if "=" in item),
        insecure_registries=insecure,
        http_backoff_s=_seconds(env.get("ENGINEBUILD_HTTP_BACKOFF"), 0.5),
        upload_deadline_s=_seconds(env.get("ENGINEBUILD_UPLOAD_DEADLINE"), 600.0),
        source_date_epoch=_epoch(env.get("SOURCE_DATE_EPOCH")),
        docker_config=Path(docker_config),
        fault=env.get("ENGINEBUILD_FAULT") or None,
        plain_progress=bool(env.get("NO_COLOR")) or env.get("CI", "").lower() in ("1", "true", "yes"),
        progress_every_s=_seconds(env.get("ENGINEBUILD_PROGRESS_EVERY"), 10.0),
    )


_CURRENT: Settings | None = None


def settings() -> Settings:
    """The settings of this process, read on first use."""
    global _CURRENT
    if _CURRENT is None:
        _CURRENT = read_settings()
    return _CURRENT


def reset_settings() -> None:
    """Forget what was read (for a process that changes its own environment, such as tests)."""
    global _CURRENT
    _CURRENT = None
