"""Registry credentials, read the way the Docker CLI reads them, never printed."""
from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path


def _config() -> dict:
    folder = os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    path = Path(folder) / "config.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _keys(registry: str) -> list:
    keys = [registry, f"https://{registry}", f"http://{registry}"]
    if registry == "registry-1.docker.io":
        keys += ["https://index.docker.io/v1/", "index.docker.io", "docker.io"]
    return keys


def registry_credentials(registry: str) -> tuple | None:
    """(username, secret) for a registry, or None for anonymous access."""
    config = _config()
    helper = (config.get("credHelpers") or {}).get(registry) or config.get("credsStore")
    if helper:
        try:
            proc = subprocess.run([f"docker-credential-{helper}", "get"], input=registry.encode(),
                                  capture_output=True, timeout=20, check=False)
            if proc.returncode == 0:
                data = json.loads(proc.stdout)
                if data.get("Secret"):
                    return data.get("Username", ""), data["Secret"]
        except (OSError, ValueError, subprocess.TimeoutExpired):
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
            return "<token>", entry["identitytoken"]
    return None
