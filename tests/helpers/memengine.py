"""A Docker engine in memory, for the build loop run in process (tests/test_build_loop.py): images
by ID with their config and layers, tags, `load` of a docker-archive as the engine takes it (every
layer's bytes hashed against the config's diff IDs, a layer left out of the archive taken from an
image it already holds, else refused), `save` of one back. It runs nothing: a build that needs
BuildKit or a container goes to the Docker tests."""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import tarfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

from enginebuild.oci.endpoint import Endpoint
from enginebuild.oci.engine import EngineApi, EngineError
from enginebuild.wire import JsonDoc


class MemoryEngine:
    def __init__(self) -> None:
        self.endpoint = Endpoint("unix:///nonexistent/memory-engine.sock")
        self.images: dict[str, tuple[bytes, list[str]]] = {}  # image ID: (config, diff IDs)
        self.blobs: dict[str, bytes] = {}  # diff ID: the layer's tar
        self.tags: dict[str, str] = {}  # REPO:TAG: image ID
        self.loads = 0  # how many `docker load`s it took
        self.sent: list[str] = []  # the diff IDs of the layers the loads carried

    # -- what a build asks ---------------------------------------------------------------------
    def ping(self) -> bool:
        return True

    def unreachable(self) -> str | None:
        return None

    def info(self) -> JsonDoc:
        return {"OSType": "linux", "Architecture": "x86_64", "Runtimes": {"runc": {}}}

    def _id(self, ref: str) -> str | None:
        if ref.startswith("sha256:") and ref in self.images:
            return ref
        return self.tags.get(ref if ":" in ref.rsplit("/", 1)[-1] else f"{ref}:latest")

    def inspect(self, ref: str) -> JsonDoc | None:
        ident = self._id(ref)
        if ident is None:
            return None
        config = json.loads(self.images[ident][0])
        return {"Id": ident, "RepoTags": sorted(t for t, i in self.tags.items() if i == ident),
                "Config": config.get("config") or {}, "Os": config.get("os", "linux"),
                "Architecture": config.get("architecture", "amd64"),
                "RootFS": {"Type": "layers", "Layers": list(self.images[ident][1])}}

    def image_id(self, ref: str) -> str | None:
        return self._id(ref)

    def tags_of(self, repository: str) -> set[str]:
        return {t.rpartition(":")[2] for t in self.tags if t.rpartition(":")[0] == repository}

    def tag(self, source: str, repository: str, tag: str) -> None:
        ident = self._id(source)
        if ident is None:
            raise EngineError(f"no image {source}")
        self.tags[f"{repository}:{tag}"] = ident

    def remove(self, ref: str, force: bool = False) -> None:
        ident = self._id(ref)
        if ident is None:
            return
        for name in [t for t, i in self.tags.items() if i == ident and (t == ref or ref == ident)]:
            del self.tags[name]
        if ident not in self.tags.values():
            del self.images[ident]

    def load(self, chunks: Iterable[bytes | memoryview], size: int) -> list[str]:
        data = b"".join(bytes(c) for c in chunks)
        assert len(data) == size, (len(data), size)  # the length it was told is the length sent
        members = {}
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar:
                handle = tar.extractfile(member)
                assert handle is not None, member.name
                members[member.name] = handle.read()
        (manifest,) = json.loads(members["manifest.json"])
        config = members[manifest["Config"]]
        diff_ids = json.loads(config)["rootfs"]["diff_ids"]
        for diff_id, name in zip(diff_ids, manifest["Layers"], strict=True):
            if name in members:
                found = "sha256:" + hashlib.sha256(members[name]).hexdigest()
                if found != diff_id:
                    raise EngineError(f"layer {name}: its bytes are {found}, the config says {diff_id}")
                self.blobs[diff_id] = members[name]
                self.sent.append(diff_id)
            elif diff_id not in self.blobs:
                raise EngineError(f"layer {diff_id} is neither in the archive nor in the engine")
        ident = "sha256:" + hashlib.sha256(config).hexdigest()
        self.images[ident] = (config, diff_ids)
        for tag in manifest["RepoTags"]:
            self.tags[tag] = ident
        self.loads += 1
        return [f"Loaded image: {t}" for t in manifest["RepoTags"]]

    @contextlib.contextmanager
    def save(self, ref: str) -> Iterator[IO[bytes]]:
        ident = self._id(ref)
        if ident is None:
            raise EngineError(f"no image {ref} in the engine")
        config, diff_ids = self.images[ident]
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w") as tar:
            names = []
            for diff_id in diff_ids:
                names.append(f"{diff_id[7:]}/layer.tar")
                _add(tar, names[-1], self.blobs[diff_id])
            _add(tar, f"{ident[7:]}.json", config)
            _add(tar, "manifest.json", json.dumps([{"Config": f"{ident[7:]}.json", "RepoTags": [ref],
                                                     "Layers": names}]).encode())
        out.seek(0)
        yield out

    def pull(self, ref: str, credentials: tuple[str, str] | None = None) -> None:
        raise EngineError(f"pulling {ref}: an engine in memory reaches no registry")

    def run(self, image: str, argv: list[str], env: dict[str, str], timeout: float = 3600) -> tuple[int, bytes, bytes]:
        raise EngineError("an engine in memory runs no container")

    def run_limited(self, image: str, argv: list[str], env: dict[str, str], limit_s: float,
                    gpus: bool = False) -> tuple[int | None, bytes, bytes]:
        raise EngineError("an engine in memory runs no container")

    def run_with_files(self, image: str, argv: list[str], limit_s: float, put: Path, take: str,
                       receive: Callable[[IO[bytes]], None]) -> tuple[int | None, bytes, bytes]:
        raise EngineError("an engine in memory runs no container")

    @contextlib.contextmanager
    def container(self, image: str) -> Iterator[str]:
        raise EngineError("an engine in memory runs no container")

    @contextlib.contextmanager
    def archive(self, container: str, path: str) -> Iterator[IO[bytes] | None]:
        raise EngineError("an engine in memory runs no container")

    # -- what a test reads -----------------------------------------------------------------------
    def _tree(self, ref: str) -> dict[str, tuple[tarfile.TarInfo, bytes | None]]:
        """The image's entries (path -> member, a file's bytes), each layer over the ones below, its
        whiteouts removing what they name."""
        ident = self._id(ref)
        assert ident is not None, ref
        entries: dict[str, tuple[tarfile.TarInfo, bytes | None]] = {}
        for diff_id in self.images[ident][1]:
            with tarfile.open(fileobj=io.BytesIO(self.blobs[diff_id])) as tar:
                for member in tar:
                    name = member.name.removeprefix("./").rstrip("/")
                    folder, _, base = name.rpartition("/")
                    if base.startswith(".wh."):
                        gone = folder if base == ".wh..wh..opq" else f"{folder}/{base[4:]}".lstrip("/")
                        entries = {k: v for k, v in entries.items()
                                   if not k.startswith(gone + "/") and (k != gone or base == ".wh..wh..opq")}
                        continue
                    handle = tar.extractfile(member) if member.isfile() else None
                    entries[name] = (member, handle.read() if handle is not None else None)
        return entries

    def files(self, ref: str) -> dict[str, bytes]:
        """The image's regular files and their bytes."""
        return {name: data for name, (_, data) in self._tree(ref).items() if data is not None}

    def filesystem(self, ref: str) -> dict[str, tuple[bytes, str, int, int, str]]:
        """As helpers.docker.filesystem reads a container's export: path -> (type, mode, uid, gid, content
        sha256 or link target)."""
        out = {}
        for name, (member, data) in self._tree(ref).items():
            body = hashlib.sha256(data).hexdigest() if data is not None else \
                member.linkname if member.issym() or member.islnk() else ""
            out[name] = (member.type, oct(member.mode & 0o7777), member.uid, member.gid, body)
        return out

    def history(self, ref: str) -> list[str]:
        """`docker history --format {{.CreatedBy}}`: the config's history, newest first."""
        ident = self._id(ref)
        assert ident is not None, ref
        return [h.get("created_by", "") for h in reversed(json.loads(self.images[ident][0]).get("history", []))]


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _is_an_engine(fake: MemoryEngine) -> EngineApi:
    return fake  # mypy over the helpers (tests/test_architecture.py) holds the fake to the protocol
