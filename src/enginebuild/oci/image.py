"""Image configs, manifests and indexes written by enginebuild, and docker-archives to load them.

A config carries no wall-clock time: `created` (of the image and of every history entry)
is the lock's `created` (or SOURCE_DATE_EPOCH). Its JSON is canonical (sorted keys, no
spaces), so the same layers and settings give the same image ID on any engine.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.core.imagesettings import kept
from enginebuild.core.platforms import Platform
from enginebuild.wire import JsonDoc

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"


def canonical(doc: object) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def image_id_of(config: bytes) -> str:
    """The engine's ID of the image whose config document is `config` (what a load makes it)."""
    return "sha256:" + hashlib.sha256(config).hexdigest()


@dataclass(frozen=True)
class Layer:
    """A layer of an image: its uncompressed digest, and where its bytes are.

    `blob` is the sha256 (hex) of the uncompressed tar in enginebuild's store; None for
    layers that come with the base image (they are in the engine, or in the base's registry)."""

    diff_id: str  # sha256:<hex>
    size: int
    created_by: str
    blob: str | None = None


@dataclass
class ImageConfig:
    """An image's config: its platform, `created`, its settings (the `config` object, keyed as the
    config keys them: core/imagesettings.py) and its history."""

    architecture: str
    os: str = "linux"
    variant: str | None = None
    created: str = "1970-01-01T00:00:00Z"
    settings: JsonDoc = field(default_factory=dict)
    base_history: list[JsonDoc] = field(default_factory=list)
    config_history: list[str] = field(default_factory=list)  # settings without a layer, for `docker history`

    def document(self, layers: list[Layer]) -> JsonDoc:
        history = list(self.base_history)
        own = [layer for layer in layers if layer.blob is not None]
        history += [{"created": self.created, "created_by": layer.created_by} for layer in own]
        history += [{"created": self.created, "created_by": text, "empty_layer": True} for text in self.config_history]
        doc: JsonDoc = {"architecture": self.architecture, "os": self.os, "created": self.created,
                        "config": kept(self.settings),
                        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
                        "history": history}
        if self.variant:
            doc["variant"] = self.variant
        return doc

    def render(self, layers: list[Layer]) -> bytes:
        return canonical(self.document(layers))


def manifest(config_digest: str, config_size: int, layers: list[tuple[str, int, str]],
             subject: JsonDoc | None = None, artifact_type: str | None = None,
             annotations: dict[str, str] | None = None, config_type: str = OCI_CONFIG) -> bytes:
    """An OCI image manifest; layers are (digest, size, media type)."""
    doc: JsonDoc = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                           "config": {"mediaType": config_type, "digest": config_digest, "size": config_size},
                           "layers": [{"mediaType": t, "digest": d, "size": s} for d, s, t in layers]}
    if artifact_type:
        doc["artifactType"] = artifact_type
    if subject:
        doc["subject"] = subject
    if annotations:
        doc["annotations"] = annotations
    return canonical(doc)


def index(manifests: list[JsonDoc], annotations: dict[str, str] | None = None) -> bytes:
    doc: JsonDoc = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
    if annotations:
        doc["annotations"] = annotations
    return canonical(doc)


def platform_of(platform: str) -> dict[str, str]:
    return Platform.parse(platform).oci()


class DockerArchive:
    """A docker-archive for `POST /images/load`: the config, the files of the layers after the
    first `present` (the engine has those), and manifest.json. Its length is known before a byte
    is sent, and `chunks` reads each layer file in 1 MiB pieces straight into the request (no
    tar library, thread or pipe between the store and the engine's socket)."""

    CHUNK = 1 << 20

    def __init__(self, config: bytes, layers: list[Layer], present: int, blob_path: Callable[[str], Path],
                 tags: list[str]):
        self.image_id = image_id_of(config)
        config_name = self.image_id.split(":", 1)[1] + ".json"
        names = [f"{layer.diff_id.split(':', 1)[1]}/layer.tar" for layer in layers]
        manifest = json.dumps([{"Config": config_name, "RepoTags": tags, "Layers": names}]).encode()
        self.members: list[tuple[str, bytes | Path, int]] = [(config_name, config, len(config))]
        for layer, name in list(zip(layers, names, strict=True))[present:]:
            assert layer.blob is not None, "a base layer the engine lacks cannot be sent"
            path = blob_path(layer.blob)
            self.members.append((name, path, path.stat().st_size))
        self.members.append(("manifest.json", manifest, len(manifest)))
        self.size = sum(len(_header(name, size)) + _padded(size) for name, _, size in self.members) + 2 * tarfile.BLOCKSIZE

    def chunks(self) -> Iterator[bytes | memoryview]:
        buffer = bytearray(self.CHUNK)
        for name, content, size in self.members:
            yield _header(name, size)
            if isinstance(content, bytes):
                yield content
            else:
                with open(content, "rb") as handle:
                    left = size
                    while left:
                        got = handle.readinto(memoryview(buffer)[:min(left, self.CHUNK)])
                        if not got:
                            raise OSError(f"{content}: shorter than the {size} bytes it had")
                        left -= got
                        yield memoryview(buffer)[:got]
            if _padded(size) > size:
                yield bytes(_padded(size) - size)
        yield bytes(2 * tarfile.BLOCKSIZE)


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(tarfile.PAX_FORMAT)


def _padded(size: int) -> int:
    return -(-size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
