"""A registry as the shared, content-addressed cache of what builds make.

What a component keeps (its outputs) and what a command wrote (its normalised layers) are
stored at `CACHE:KEY` as OCI artifacts: a config naming the key and the record, and the
blobs as layers (uncompressed tars, so their digests are the store's). Whether a key is
there is asked with a HEAD; a hit is downloaded blob by blob, each verified by digest,
and refused if its config names another key. A fresh runner thus fetches a vLLM build's
outputs instead of compiling for an hour, without pulling any image into its engine.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from enginebuild.build.assemble import layer_blobs, put_layer_blobs, record_key
from enginebuild.errors import RegistryError, UserError
from enginebuild.io.files import opener
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.oci.image import OCI_LAYER_TAR, canonical, manifest
from enginebuild.oci.reference import ImageRef, parse_image_ref
from enginebuild.oci.registry import RegistryClient, sha256_digest
from enginebuild.plan.model import ComponentNode, LayerNode
from enginebuild.settings import settings
from enginebuild.spec.repo_settings import load_repo_settings
from enginebuild.wire import JsonDoc

CONFIG_TYPE = "application/vnd.enginebuild.cache.v1+json"
WHEEL_TYPE = "application/vnd.enginebuild.wheel"


def parse_cache_repo(text: str) -> ImageRef:
    try:
        ref = parse_image_ref(text)
    except ValueError as exc:
        raise UserError(f"cache repository {text!r}: {exc}") from None
    if ref.digest or ":" in text.rsplit("/", 1)[-1]:
        raise UserError(f"cache repository {text!r}: name a repository (REGISTRY/REPO), without a tag or digest")
    return ref


@dataclass
class LayerCache:
    repo: ImageRef
    push_enabled: bool = True
    client: RegistryClient = field(default_factory=RegistryClient)
    _known: dict[str, bool] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.repo.name

    def _ref(self, key: str) -> ImageRef:
        return ImageRef(self.repo.registry, self.repo.repository, key, None)

    def has(self, key: str) -> bool:
        if key not in self._known:
            self._known[key] = self.client.head_digest(self._ref(key)) is not None
        return self._known[key]

    def lacks(self, key: str) -> bool:
        """True when this run may push and the cache has nothing under `key`: what this machine
        made earlier fills the cache as well as what it builds now."""
        return self.push_enabled and not self.has(key)

    # -- reading -------------------------------------------------------------------------------
    def fetch_entry(self, key: str, kind: str, store: Store) -> JsonDoc | None:
        if not self.has(key):
            return None
        _, _, body = self.client.manifest(self._ref(key))
        doc = json.loads(body)
        config = json.loads(self.client.read_blob(self._ref(key), doc["config"]["digest"]))
        if config.get("key") != key or config.get("kind") != kind:
            output().say(f"  warning: {self.name}:{key[:12]} is not the {kind} it is named after; building instead")
            return None
        for layer in doc.get("layers", []):
            sha = layer["digest"].split(":", 1)[1]
            if store.check(sha, f"cached blob {sha[:12]}"):
                continue
            with self.client.open_blob(self._ref(key), layer["digest"]) as response, store.ingest("cache") as sink:
                for block in response.iter_content(1 << 20):
                    sink.write(block)
            if sink.hexdigest() != sha:
                store.path(sink.hexdigest()).unlink(missing_ok=True)
                raise RegistryError(f"{self.name}:{key[:12]}: a blob does not hash to its digest; nothing kept")
        record = config.get("record")
        return record if isinstance(record, dict) else None

    def pull_output(self, comp: ComponentNode, store: Store) -> bool:
        record = self.fetch_entry(comp.key, "component-output", store)
        if record is None:
            return False
        store.put_record("outputs", comp.key, record)
        output().say(f"  component {comp.name}: outputs pulled from {self.name}")
        return True

    def pull_layer(self, node: LayerNode, store: Store) -> bool:
        record = self.fetch_entry(record_key(node), "layer", store)
        if record is None:
            return False
        put_layer_blobs(store, node, [(str(s), int(n)) for s, n in record["layers"]], {"from": self.name})
        output().say(f"  {node.name}: pulled from {self.name}")
        return True

    # -- writing -------------------------------------------------------------------------------
    def push_entry(self, key: str, kind: str, record: JsonDoc, blobs: list[tuple[str, int, str]],
              store: Store) -> None:
        if not self.push_enabled:
            return
        ref = self._ref(key)
        for sha, size, _ in blobs:
            digest = f"sha256:{sha}"
            if not self.client.has_blob(ref, digest):
                path = store.verified(sha, f"blob {sha[:12]}")
                self.client.upload_blob(ref, digest, size, opener(path))
        config = canonical({"kind": kind, "key": key, "record": record})
        config_digest = sha256_digest(config)
        if not self.client.has_blob(ref, config_digest):
            self.client.upload_blob(ref, config_digest, len(config), lambda: _bytes(config))
        body = manifest(config_digest, len(config), [(f"sha256:{s}", n, t) for s, n, t in blobs],
                        artifact_type=CONFIG_TYPE, config_type=CONFIG_TYPE)
        self.client.put_manifest(ref, key, body, "application/vnd.oci.image.manifest.v1+json")
        self._known[key] = True

    def push_output(self, comp: ComponentNode, store: Store) -> None:
        record = store.record("outputs", comp.key)
        if record is None:
            return
        blobs = [(str(record["sha256"]), int(record["size"]), OCI_LAYER_TAR)]
        blobs += [(str(sha), int(size), WHEEL_TYPE) for _, sha, size in record.get("wheels") or ()]
        self.push_entry(comp.key, "component-output", {k: v for k, v in record.items() if k != "key"}, blobs, store)
        output().say(f"  component {comp.name}: outputs pushed to {self.name}")

    def push_layer(self, node: LayerNode, store: Store) -> None:
        blobs = layer_blobs(store, node) or []
        self.push_entry(record_key(node), "layer", {"layers": [list(b) for b in blobs], "name": node.name},
                   [(s, n, OCI_LAYER_TAR) for s, n in blobs], store)


def _bytes(data: bytes) -> Any:
    return io.BytesIO(data)


def cache_from_settings(root: Path, cli_repo: str | None, disabled: bool, readonly: bool) -> LayerCache | None:
    """--cache, else $ENGINEBUILD_CACHE, else `cache:` in enginebuild.yaml; --no-registry-cache turns it off."""

    if disabled:
        return None
    repo_settings = load_repo_settings(root)
    repo = cli_repo or settings().cache or repo_settings.cache_repository
    if not repo:
        return None
    push = repo_settings.cache_push and not readonly and not settings().cache_readonly
    return LayerCache(parse_cache_repo(repo), push_enabled=push)
