"""A served image's compile caches on each node: the folders the image declares (its label
`org.enginebuild.compile-cache`, NAME: FOLDER, from the spec's `compile-cache:`) are named volumes
of the node's engine (`enginebuild-cache-CLUSTER-NAME`), mounted into the node's container, so what
its engine compiles outlives the container. Capturing, reading a node's record and restoring run
compilecache.py in a container of the image on the node (its Python, its GPUs, the model mounted),
so the record is the one the engine's compiled code depends on, read where it runs."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

from enginebuild.errors import EngineBuildError, shown_line
from enginebuild.oci.engine import Engine
from enginebuild.serving.driver import Reached, ServeFailed, helper
from enginebuild.wire import JsonDoc, loads

LABEL = "org.enginebuild.compile-cache"
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
FOLDER = re.compile(r"/[A-Za-z0-9._@+=,-]+(?:/[A-Za-z0-9._@+=,-]+)*")
PROGRAM = Path(__file__).with_name("compilecache.py").read_text
INSIDE = "/.enginebuild-compile-cache.tar.gz"  # where the archive is, in the helper's container
LIMIT_S = 1800.0


def folders_of(engine: Engine, image: str) -> dict[str, str]:
    """NAME: FOLDER the image declares; {} for none. The label is the image's (another party's):
    names and folders are checked before any is used."""
    labels = ((engine.inspect(image) or {}).get("Config") or {}).get("Labels") or {}
    text = labels.get(LABEL)
    if not text:
        return {}
    try:
        found = loads(str(text))
    except ValueError:
        found = None
    if not isinstance(found, dict) or not found or len(found) > 16 or not all(
            isinstance(k, str) and NAME.fullmatch(k) and isinstance(v, str) and FOLDER.fullmatch(v)
            and ".." not in v.split("/") for k, v in found.items()):
        raise ServeFailed([f"{image}: its label {LABEL} is not NAME: FOLDER pairs (absolute folders): "
                           f"{shown_line(str(text), 200)}"])
    return dict(sorted(found.items()))


def volume(cluster: str, name: str) -> str:
    return f"enginebuild-cache-{cluster}-{name}"


def mounts(cluster: str, folders: dict[str, str]) -> tuple[JsonDoc, ...]:
    return tuple({"Type": "volume", "Source": volume(cluster, name), "Target": folder}
                 for name, folder in folders.items())


def clear(each: Reached, cluster: str, folders: dict[str, str]) -> None:
    """The cluster's cache volumes on the node removed (a warm-up starts from nothing)."""
    for name in folders:
        try:
            each.engine.call("DELETE", f"/volumes/{volume(cluster, name)}", {"force": "1"})
        except EngineBuildError as exc:
            raise ServeFailed([f"{each.node.name}: cannot empty the compile cache {volume(cluster, name)}: "
                               f"{exc.message}"]) from None


def _said(each: Reached, printed: str, what: str) -> JsonDoc:
    for line in reversed(printed.splitlines()):
        if line.startswith("{"):
            try:
                doc = loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                return doc
    raise ServeFailed([f"{each.node.name}: {what}: the image's python3 said nothing that can be read: "
                       f"{shown_line(printed.strip()[-300:]) or 'no output'}"])


def record(each: Reached, image: str, cluster: str, gpus: bool, binds: list[str], model: str, args: str) -> dict[str, str]:
    """The node's record, read in a container of the image there."""
    printed = helper(each, image, ["-c", PROGRAM(), "record", model, args], gpus, binds, (), cluster, 120)
    found = _said(each, printed, "reading its compile-cache record").get("record")
    if not isinstance(found, dict):
        raise ServeFailed([f"{each.node.name}: its compile-cache record could not be read"])
    return {str(k): str(v) for k, v in found.items()}


def capture(each: Reached, image: str, folders: dict[str, str], cluster: str, gpus: bool, binds: list[str],
            model: str, args: str, out: Path) -> JsonDoc:
    """The node's cache volumes as one archive at `out`; what it holds (sha256, size, files, record)."""
    printed = helper(each, image, ["-c", PROGRAM(), "capture", json.dumps(folders), model, args, INSIDE], gpus, binds,
                     mounts(cluster, folders), cluster, LIMIT_S, take=out, taken=INSIDE)
    said = _said(each, printed, "capturing its compile cache")
    if "refused" in said or not out.is_file():
        raise ServeFailed([f"{each.node.name}: capturing its compile cache: {shown_line(str(said.get('refused')))}"])
    return said


def restore(each: Reached, image: str, folders: dict[str, str], cluster: str, gpus: bool, binds: list[str],
            model: str, args: str, archive: Path) -> tuple[int, str]:
    """The archive's files into the node's cache volumes, where its record is the node's: (files
    written, why none were: compilecache.py's refusal naming the field)."""
    sent = archive.with_name(archive.name + ".tar")
    try:
        with tarfile.open(sent, mode="w") as tar:
            tar.add(archive, arcname=INSIDE.lstrip("/"))
        printed = helper(each, image, ["-c", PROGRAM(), "restore", INSIDE, json.dumps(folders), model, args], gpus,
                         binds, mounts(cluster, folders), cluster, LIMIT_S, put=("/", sent))
    finally:
        sent.unlink(missing_ok=True)
    said = _said(each, printed, "restoring its compile cache")
    if "refused" in said:
        return 0, shown_line(str(said["refused"]), 600)
    return int(said.get("restored", 0)), ""
