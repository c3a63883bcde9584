"""Small helpers around the docker CLI for assertions in tests."""
from __future__ import annotations

import json
import subprocess


def docker(*args, check=True, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=timeout)


def inspect(ref: str) -> dict:
    return json.loads(docker("image", "inspect", ref).stdout)[0]


def layers(ref: str) -> list:
    return inspect(ref)["RootFS"]["Layers"]
