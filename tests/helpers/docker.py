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


def read_file(ref: str, path: str) -> bytes:
    """A file of an image (as a one-member tar stream's content), without running anything in it."""
    import io
    import tarfile

    cid = docker("create", ref, "unused").stdout.strip()
    try:
        stream = subprocess.run(["docker", "cp", f"{cid}:{path}", "-"], capture_output=True, check=True).stdout
    finally:
        docker("rm", cid, check=False)
    with tarfile.open(fileobj=io.BytesIO(stream)) as tar:
        member = tar.next()
        assert member is not None
        handle = tar.extractfile(member)
        assert handle is not None
        return handle.read()
