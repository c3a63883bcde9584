"""Registry credentials, read the way the Docker CLI reads them, never printed."""

from __future__ import annotations

import base64
import json

from enginebuild.errors import EngineBuildError
from enginebuild.io import proc
from enginebuild.settings import settings
from enginebuild.wire import JsonDoc


def _config() -> JsonDoc:
    try:
        data = json.loads((settings().docker_config / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _keys(registry: str) -> list[str]:
    keys = [registry, f"https://{registry}", f"http://{registry}"]
    if registry == "registry-1.docker.io":
        keys += ["https://index.docker.io/v1/", "index.docker.io", "docker.io"]
    return keys


def registry_credentials(registry: str) -> tuple[str, str] | None:
    """(username, secret) for a registry, or None for anonymous access."""
    config = _config()
    helper = (config.get("credHelpers") or {}).get(registry) or config.get("credsStore")
    if helper:
        try:
            result = proc.run([f"docker-credential-{helper}", "get"], input=registry.encode(), check=False, timeout=20)
            if result.returncode == 0:
                data = json.loads(result.stdout)
                if data.get("Secret"):
                    return str(data.get("Username", "")), str(data["Secret"])
        except (EngineBuildError, ValueError):
            pass
    auths = config.get("auths") or {}
    for key in _keys(registry):
        entry = auths.get(key)
        if entry and entry.get("auth"):
            try:
                user, _, secret = base64.b64decode(entry["auth"]).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                continue
            return user, secret
        if entry and entry.get("identitytoken"):
            return "<token>", str(entry["identitytoken"])
    return None


def has_credentials(registry: str) -> bool:
    return registry_credentials(registry) is not None
