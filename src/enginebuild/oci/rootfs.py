"""Reading files of an image's filesystem from its layers, without pulling it into an engine.

Layers are streamed from the registry in order; a later layer's file replaces an earlier
one's and its whiteouts (`.wh.NAME`, `.wh..wh..opq`) delete them, as an engine would.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Callable
from typing import IO, cast

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from enginebuild.errors import RegistryError, printable
from enginebuild.io.progress import output
from enginebuild.oci.reference import ImageRef
from enginebuild.oci.registry import RegistryClient
from enginebuild.wire import JsonDoc

Wanted = Callable[[str], bool]


def read_files(client: RegistryClient, ref: ImageRef, manifest: JsonDoc, wanted: Wanted,
               limit: int = 1 << 20) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for layer in manifest.get("layers", []):
        media = layer.get("mediaType", "")
        if "zstd" in media:
            raise RegistryError(f"{ref}: layer {layer['digest'][:19]} is zstd-compressed, which enginebuild cannot read")
        with client.open_blob(ref, layer["digest"]) as response:
            mode = "r|gz" if media.endswith("gzip") or media.endswith(".tar.gzip") or "gzip" in media else "r|*"
            with tarfile.open(fileobj=cast(IO[bytes], response.raw), mode=mode) as tar:  # type: ignore[call-overload]
                for member in tar:
                    name = member.name.lstrip("./").lstrip("/")
                    folder, _, base = name.rpartition("/")
                    if base == ".wh..wh..opq":
                        prefix = f"{folder}/" if folder else ""
                        for path in [p for p in found if p.startswith(prefix)]:
                            del found[path]
                        continue
                    if base.startswith(".wh."):
                        target = f"{folder}/{base[4:]}" if folder else base[4:]
                        for path in [p for p in found if p == target or p.startswith(target + "/")]:
                            del found[path]
                        continue
                    if member.isreg() and wanted(name) and member.size <= limit:
                        handle = tar.extractfile(member)
                        if handle is not None:
                            found[name] = handle.read()
    return found


_DIST = re.compile(r"(?:^|/)(?:site|dist)-packages/[^/]+\.(?:dist-info/METADATA|egg-info/PKG-INFO)$")


DIST_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?")  # PEP 508's name, bounded


def dist_version(text: str) -> bool:
    """Whether `text` is a version as PEP 440 writes one (what a resolver and a file name can carry)."""
    try:
        Version(text)
    except InvalidVersion:
        return False
    return len(text) <= 128


def python_dist_folders(files: dict[str, bytes]) -> dict[str, tuple[str, str]]:
    """name -> (version, the folder of its metadata) of the Python distributions a filesystem holds.
    A base is another party's: metadata whose Name is not a distribution's name or whose Version is
    not a version is left out, said once, and never becomes a file name."""

    out: dict[str, tuple[str, str]] = {}
    for path, data in sorted(files.items()):
        if not _DIST.search(path):
            continue
        name = version = None
        for line in data.decode("utf-8", "replace").splitlines():
            if not line.strip():
                break
            if line.startswith("Name:"):
                name = line[5:].strip()
            elif line.startswith("Version:"):
                version = line[8:].strip()
        if name and version and (not DIST_NAME.fullmatch(name) or not dist_version(version)):
            output().say(f"  warning: the base's {path[:200]!r} names {printable(name[:80])!r} "
                         f"{printable(version[:80])!r}, not a distribution and version: left out")
        elif name and version:
            out[canonicalize_name(name)] = (version, path.rpartition("/")[0])
    return out


def is_dist_metadata(path: str) -> bool:
    return bool(_DIST.search(path))
