"""A registry as the shared, content-addressed cache of what builds make.

What a component keeps (its outputs) and what a command wrote (its normalised layers) are
stored at `CACHE:KEY` as OCI artifacts: a config naming the key and the record, and the
blobs as layers (uncompressed tars, so their digests are the store's), the manifest signed
by the writer's key (cachetrust.py). Whether a key is there is asked with a HEAD, then its
manifest: an entry no trusted key signed counts as absent. A hit's record must have its
kind's shape (cacherecords.py), its config must name the key, and its blobs are downloaded
one by one, each bounded by its stated size and verified by digest. A fresh runner thus
fetches a vLLM build's outputs instead of compiling for an hour, without pulling any image
into its engine; a writer without a trusted key can make a build slower, never different.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from enginebuild.errors import RegistryError, UserError
from enginebuild.io.files import opener
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.oci.image import OCI_LAYER_TAR, canonical, manifest
from enginebuild.oci.reference import ImageRef, parse_image_ref
from enginebuild.oci.registry import BadManifest, RegistryClient, sha256_digest
from enginebuild.plan.model import ComponentNode, LayerNode
from enginebuild.plan.stored import layer_blobs, put_layer_blobs, record_key
from enginebuild.recipe.repo_settings import load_repo_settings
from enginebuild.registrycache import cacherecords
from enginebuild.settings import settings
from enginebuild.trust import cachetrust
from enginebuild.trust.cachetrust import PublicKey, Trust
from enginebuild.wire import JsonDoc, loads, loads_object

CONFIG_TYPE = "application/vnd.enginebuild.cache.v1+json"
WHEEL_TYPE = "application/vnd.enginebuild.wheel"
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"  # the one blob of an entry that carries none (a description)
CONFIG_LIMIT = 4 << 20  # bytes of an entry's config (its record) read at most


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
    """A registry repository as the cache: entries signed here, taken only when a trusted key
    signed them and their records have their kind's shape (cachetrust.py, cacherecords.py);
    anything else is left for the build to make."""

    repo: ImageRef
    push_enabled: bool = True
    client: RegistryClient = field(default_factory=RegistryClient)
    home: Path = field(default_factory=lambda: settings().home)  # where this store's own signing key lives
    trust: Trust = field(default_factory=lambda: Trust(frozenset()))
    # searches the blobs about to be pushed for declared secrets: (sha256, what) -> raises SecretLeak
    guard: Callable[[list[tuple[str, str]]], None] | None = None
    _known: dict[str, JsonDoc | None] = field(default_factory=dict)  # key -> its trusted manifest, or None
    _said: set[str] = field(default_factory=set)
    _own: cachetrust.SigningKey | None = None  # this store's signing key, once read

    @property
    def name(self) -> str:
        return self.repo.name

    def _ref(self, key: str) -> ImageRef:
        return ImageRef(self.repo.registry, self.repo.repository, key, None)

    def guarded_by(self, guard: Callable[[list[tuple[str, str]]], None]) -> LayerCache:
        """This cache, whose pushes first hand their blobs to `guard` (what it knew is shared)."""
        return dataclasses.replace(self, guard=guard)

    def has(self, key: str) -> bool:
        """Whether the cache holds an entry under `key` that a trusted key signed."""
        if key not in self._known:
            self._known[key] = self._signed_manifest(key)
        return self._known[key] is not None

    def held_by_another(self, key: str) -> bool:
        """Whether a key trusted here, not this machine's own, signed the entry under `key`: such an
        entry is left as it is (a pusher others may not trust never replaces what they take)."""
        if not self.has(key):
            return False
        doc = self._known[key]
        assert doc is not None
        signer, _ = cachetrust.signer(key, doc)
        if self._own is None:  # read once a run, not once a layer (again while there is none yet)
            self._own = cachetrust.signing_key(self.home, make=False)
        return self._own is None or signer != self._own.public

    def lacks(self, key: str) -> bool:
        """True when this run may push and the cache has nothing under `key` (or nothing trusted):
        what this machine made earlier fills the cache as well as what it builds now."""
        return self.push_enabled and not self.has(key)

    def _signed_manifest(self, key: str) -> JsonDoc | None:
        if self.client.head_digest(self._ref(key)) is None:
            return None
        try:
            _, _, body = self.client.manifest(self._ref(key))
            doc = loads_object(body)
        except (BadManifest, ValueError):
            self._refuse(key, "its manifest is not a JSON object that can be read")
            return None
        signer, holds = cachetrust.signer(key, doc)
        if not holds or not self.trust.trusts(signer):
            self._untrusted(signer, holds)
            return None
        return doc

    def _untrusted(self, signer: PublicKey | None, holds: bool) -> None:
        if not holds:
            why = "unsigned or not signed as enginebuild signs" if signer is None else \
                f"whose signature by {signer.short} does not hold"
        else:
            why = f"signed by {signer.short if signer else '?'}, a key not trusted here"
        if why not in self._said:
            self._said.add(why)
            output().say(f"  warning: {self.name}: entries {why} are not used; what they describe is made here")
            if holds and signer is not None:  # the writer chose that key: its fingerprint, never advice to trust it
                output().say("    (to take a writer's entries, list its public key - `doctor` prints it on the machine that "
                             "wrote them - under cache.trust in enginebuild.yaml or in ENGINEBUILD_CACHE_TRUST; "
                             "docs/cache.md)")

    def _refuse(self, key: str, why: str) -> None:
        output().say(f"  warning: {self.name}:{key[:12]} refused ({why}); what it describes is made here")

    # -- reading -------------------------------------------------------------------------------
    def fetch_entry(self, key: str, kind: str, store: Store) -> JsonDoc | None:
        """The record of the entry under `key`, its blobs downloaded into the store (each bounded
        by its stated size and hashed); None (said why) when there is none this machine may use."""
        if not self.has(key):
            return None
        doc = self._known[key]
        assert doc is not None
        try:
            blobs = cacherecords.blobs_of(doc)
            config_desc = doc.get("config")
            if not isinstance(config_desc, dict) or not isinstance(config_desc.get("digest"), str) or \
                    not cacherecords.DIGEST.fullmatch(config_desc["digest"]):
                raise cacherecords.BadEntry("config: not a descriptor")
            config = loads(self.client.read_blob(self._ref(key), config_desc["digest"], limit=CONFIG_LIMIT))
            if not isinstance(config, dict) or config.get("key") != key or config.get("kind") != kind:
                output().say(f"  warning: {self.name}:{key[:12]} is not the {kind} it is named after; building instead")
                return None
            record = cacherecords.checked(kind, config.get("record"), blobs)
        except (cacherecords.BadEntry, ValueError) as exc:
            self._refuse(key, str(exc))
            return None
        for sha, size in blobs.items():
            if not store.check(sha, f"cached blob {sha[:12]}"):
                self._download(key, sha, size, store)
        return record

    def _download(self, key: str, sha: str, size: int, store: Store) -> None:
        """One blob, kept only when exactly `size` bytes came that hash to `sha`."""
        with self.client.open_blob(self._ref(key), f"sha256:{sha}") as response, store.ingest("cache") as sink:
            for block in response.iter_content(1 << 20):
                if sink.size + len(block) > size:
                    raise RegistryError(f"{self.name}:{key[:12]}: blob {sha[:12]} is longer than the {size} bytes "
                                        "its entry states; nothing kept")
                sink.write(block)
            if sink.size != size or sink.hexdigest() != sha:
                raise RegistryError(f"{self.name}:{key[:12]}: a blob does not hash to its digest; nothing kept")

    def pull_output(self, comp: ComponentNode, store: Store) -> bool:
        record = self.fetch_entry(comp.key, cacherecords.OUTPUT, store)
        if record is None:
            return False
        store.put_record("outputs", comp.key, record)
        output().say(f"  component {comp.name}: outputs pulled from {self.name}")
        return True

    def pull_layer(self, node: LayerNode, store: Store) -> bool:
        record = self.fetch_entry(record_key(node), cacherecords.LAYER, store)
        if record is None:
            return False
        put_layer_blobs(store, node, [(str(s), int(n)) for s, n in record["layers"]], {"from": self.name})
        output().say(f"  {node.name}: pulled from {self.name}")
        return True

    # -- writing -------------------------------------------------------------------------------
    def push_entry(self, key: str, kind: str, record: JsonDoc, blobs: list[tuple[str, int, str]],
                   store: Store, what: str = "") -> None:
        """Push an entry signed by this machine's key; the blobs it carries first go past the guard
        (the declared secrets' search), and nothing is pushed when it refuses them. An entry that
        carries none (a description, a verdict) needs no guard."""
        if not self.push_enabled:
            return
        carried = [(sha, what or f"{kind} {key[:12]}") for sha, _, mt in blobs if mt != EMPTY_TYPE]
        if carried:
            if self.guard is None:
                raise AssertionError("a push of blobs to the registry cache without the secret search")
            self.guard(carried)
        key_to_sign = self._signing_key()
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
        layers = [(f"sha256:{s}", n, t) for s, n, t in blobs]
        unsigned = loads(manifest(config_digest, len(config), layers, artifact_type=CONFIG_TYPE,
                                       config_type=CONFIG_TYPE))
        body = manifest(config_digest, len(config), layers, artifact_type=CONFIG_TYPE, config_type=CONFIG_TYPE,
                        annotations=cachetrust.signed(key_to_sign, key, unsigned))
        self.client.put_manifest(ref, key, body, "application/vnd.oci.image.manifest.v1+json")
        self._known[key] = loads(body)

    def _signing_key(self) -> cachetrust.SigningKey:
        had = cachetrust.signing_key(self.home, make=False)
        key = had or cachetrust.signing_key(self.home, make=True)
        assert key is not None
        if had is None:
            output().say(f"  note: this store's cache signing key was made ({key.origin}); machines that trust "
                         f"{key.public.text} take what it signs (cache.trust in enginebuild.yaml; docs/cache.md)")
        return key

    def push_output(self, comp: ComponentNode, store: Store) -> None:
        record = store.record("outputs", comp.key)
        if record is None:
            return
        blobs = [(str(record["sha256"]), int(record["size"]), OCI_LAYER_TAR)]
        blobs += [(str(sha), int(size), WHEEL_TYPE) for _, sha, size in record.get("wheels") or ()]
        self.push_entry(comp.key, cacherecords.OUTPUT, {k: v for k, v in record.items() if k != "key"}, blobs, store,
                        f"outputs of component {comp.name}")
        output().say(f"  component {comp.name}: outputs pushed to {self.name}")

    def push_layer(self, node: LayerNode, store: Store) -> None:
        blobs = layer_blobs(store, node) or []
        self.push_entry(record_key(node), cacherecords.LAYER, {"layers": [list(b) for b in blobs], "name": node.name},
                        [(s, n, OCI_LAYER_TAR) for s, n in blobs], store, node.name)


def _bytes(data: bytes) -> IO[bytes]:
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
    home = settings().home
    return LayerCache(parse_cache_repo(repo), push_enabled=push, home=home,
                      trust=cachetrust.trust(home, repo_settings.cache_trust))
