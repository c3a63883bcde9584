"""Image configs, manifests and indexes written by enginebuild, and docker-archives to load them.

A config carries no wall-clock time: `created` (of the image and of every history entry)
is the lock's `created` (or SOURCE_DATE_EPOCH). Its JSON is canonical (sorted keys, no
spaces), so the same layers and settings give the same image ID on any engine.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from enginebuild.wire import JsonDoc

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"


def canonical(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


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
    architecture: str
    os: str = "linux"
    variant: str | None = None
    created: str = "1970-01-01T00:00:00Z"
    env: list[str] = field(default_factory=list)
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    workdir: str = ""
    user: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    exposed: list[str] = field(default_factory=list)
    stopsignal: str | None = None
    shell: list[str] | None = None
    healthcheck: JsonDoc | None = None
    base_history: list[JsonDoc] = field(default_factory=list)
    config_history: list[str] = field(default_factory=list)  # settings without a layer, for `docker history`

    def document(self, layers: list[Layer]) -> JsonDoc:
        body: dict[str, Any] = {"Env": self.env, "Labels": self.labels or None}
        if self.entrypoint is not None:
            body["Entrypoint"] = self.entrypoint
        if self.cmd is not None:
            body["Cmd"] = self.cmd
        if self.workdir:
            body["WorkingDir"] = self.workdir
        if self.user:
            body["User"] = self.user
        if self.exposed:
            body["ExposedPorts"] = {p: {} for p in self.exposed}
        if self.stopsignal:
            body["StopSignal"] = self.stopsignal
        if self.shell:
            body["Shell"] = self.shell
        if self.healthcheck:
            body["Healthcheck"] = self.healthcheck
        history = list(self.base_history)
        own = [layer for layer in layers if layer.blob is not None]
        history += [{"created": self.created, "created_by": layer.created_by} for layer in own]
        history += [{"created": self.created, "created_by": text, "empty_layer": True} for text in self.config_history]
        doc: dict[str, Any] = {"architecture": self.architecture, "os": self.os, "created": self.created,
                               "config": {k: v for k, v in body.items() if v is not None},
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
    doc: dict[str, Any] = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
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
    doc: dict[str, Any] = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
    if annotations:
        doc["annotations"] = annotations
    return canonical(doc)


def platform_of(platform: str) -> dict[str, str]:
    os_name, _, arch = platform.partition("/")
    arch, _, variant = arch.partition("/")
    out = {"os": os_name, "architecture": arch}
    if variant:
        out["variant"] = variant
    elif arch == "arm64":
        out["variant"] = "v8"
    return out


def write_docker_archive(out: IO[bytes], config: bytes, layers: list[Layer], present: int,
                         blob_path: Callable[[str], Path], tags: list[str]) -> None:
    """A docker-archive for `POST /images/load`: the config, the files of the layers after the
    first `present` (the engine has those), and manifest.json."""

    config_name = hashlib.sha256(config).hexdigest() + ".json"
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        add(config_name, config)
        names = []
        for i, layer in enumerate(layers):
            name = f"{layer.diff_id.split(':', 1)[1]}/layer.tar"
            names.append(name)
            if i < present:
                continue
            assert layer.blob is not None, "a base layer the engine lacks cannot be sent"
            path = blob_path(layer.blob)
            info = tarfile.TarInfo(name)
            info.size = path.stat().st_size
            with open(path, "rb") as handle:
                tar.addfile(info, handle)
        add("manifest.json", json.dumps([{"Config": config_name, "RepoTags": tags, "Layers": names}]).encode())


@contextmanager
def piped(write: Callable[[IO[bytes]], None]) -> Iterator[IO[bytes]]:
    """A readable stream of what `write` writes (in a thread); its exception is raised here."""
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "rb")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with os.fdopen(write_fd, "wb") as sink:
                write(sink)
        except BaseException as exc:  # handed over to the reading thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield reader
    finally:
        reader.close()
        thread.join()
    if errors and not isinstance(errors[0], BrokenPipeError):
        raise errors[0]
