"""Small helpers around the docker CLI for assertions in tests."""
from __future__ import annotations

import hashlib
import json
import subprocess
import tarfile
import time

from helpers import report


def docker(*args, check=True, timeout=600) -> subprocess.CompletedProcess:
    started = time.monotonic()
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, check=check, timeout=timeout)
    finally:
        report.called(["docker", *args], time.monotonic() - started)


def enginebuild_tags() -> set[str]:
    """The chain and component images enginebuild keeps in the engine (a real-scale image's chain
    holds GBs): a test that makes them removes those that were not there before it."""
    return {ref for repo in ("enginebuild/chain", "enginebuild/component")
            for ref in docker("images", repo, "--format", "{{.Repository}}:{{.Tag}}").stdout.split()}


def remove_new_tags(before: set[str], home, *tags: str) -> None:
    """`tags` (forced: the names the test's builds gave), then the chain and component images that
    the store at `home` made since `before` (by its records of the tags it made, never "what
    appeared": another store's builds on the same engine keep theirs), one `docker rmi` each group:
    a ref that is gone already is reported by the engine and passed over."""
    from pathlib import Path

    from enginebuild.execution.enginetags import ours
    from enginebuild.io.store import Store

    if tags:
        docker("rmi", "-f", *tags, check=False)
    store = Store(Path(home))
    made = sorted(ref for ref in enginebuild_tags() - before if ours(store, ref))
    if made:
        docker("rmi", *made, check=False)


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


def filesystem(ref: str) -> dict:
    """Every entry of the image's filesystem: path -> (type, mode, uid, gid, content sha or link target)."""
    container = docker("create", ref, "/nothing").stdout.strip()
    try:
        export = subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE)
        entries = {}
        with tarfile.open(fileobj=export.stdout, mode="r|") as tar:
            for member in tar:
                if member.name in (".dockerenv", "etc/hosts", "etc/hostname", "etc/resolv.conf", "proc", "sys",
                                   "dev", "etc/mtab") or member.name.startswith(("dev/", "proc/", "sys/")):
                    continue  # made by the engine for every container
                body = ""
                if member.isfile():
                    body = hashlib.sha256(tar.extractfile(member).read()).hexdigest()
                elif member.issym() or member.islnk():
                    body = member.linkname
                entries[member.name.rstrip("/")] = (member.type, oct(member.mode & 0o7777), member.uid, member.gid, body)
        assert export.wait() == 0
        return entries
    finally:
        docker("rm", container)


def assert_pip_check_clean(ref: str, *entrypoint: str) -> None:
    """`python3 -m pip check` in the image finds nothing broken (`entrypoint`: how to reach python3)."""
    check = docker("run", "--rm", *entrypoint, ref, "-m", "pip", "check", check=False)
    assert check.returncode == 0 and "No broken requirements found" in check.stdout, check.stdout + check.stderr
