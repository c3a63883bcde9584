"""Images into the engine: the layers of a chain (the base's, then enginebuild's), a config
written by enginebuild, and `docker load` of only what the engine does not have yet.

A base image is learned once per digest: its exact config (with its history) and the size
of each of its layers, read from one streamed `docker save`, then recorded in the store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass

from enginebuild.core.imagesettings import laid_over, of_base
from enginebuild.core.platforms import Platform
from enginebuild.errors import BuildFailed, EngineBuildError
from enginebuild.execution import enginetags
from enginebuild.io.progress import Work, human_bytes, output
from enginebuild.io.store import Store
from enginebuild.lock.pins import ImagePin
from enginebuild.oci.credentials import registry_credentials
from enginebuild.oci.engine import EngineApi
from enginebuild.oci.image import DockerArchive, ImageConfig, Layer, image_id_of
from enginebuild.oci.reference import parse_image_ref
from enginebuild.plan.envs import CHAIN_REPO
from enginebuild.plan.model import EnvNode, ImageSettings
from enginebuild.plan.stored import layer_blobs
from enginebuild.wire import JsonDoc


@dataclass(frozen=True)
class Base:
    config: JsonDoc  # the base's image config, exactly as published
    layers: tuple[Layer, ...]

    @property
    def history(self) -> list[JsonDoc]:
        return list(self.config.get("history") or [])


SCRATCH = Base({}, ())
MAX_DEPTH = 125  # Docker's layer store loads 125 layers and refuses 126 ("max depth exceeded": measured)


# the PATH BuildKit gives an image whose configuration names none (FROM scratch)
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Assembler:
    def __init__(self, engine: EngineApi, store: Store):
        self.engine, self.store = engine, store
        self._bases: dict[str, Base] = {}
        self.rendered: tuple[bytes, list[Layer]] = (b"", [])
        self.before: str | None = None  # the image the last `load`'s first tag named before it
        self.before_layers: list[str] = []  # its layers (diff IDs), when it is not the image loaded

    # -- bases -------------------------------------------------------------------------------
    def base(self, pin: ImagePin | None) -> Base:
        if pin is None:
            return SCRATCH
        assert pin.digest is not None
        if pin.digest in self._bases:
            return self._bases[pin.digest]
        record = self.store.record("bases", pin.digest.split(":")[1])
        if record is None or self.engine.inspect(pin.ref) is None:
            self.ensure_pulled(pin.ref)
        if record is None:
            record = self._learn(pin.ref)
            self.store.put_record("bases", pin.digest.split(":")[1], record)
        config = json.loads(record["config"])
        layers = tuple(Layer(d, int(s), "base", None) for d, s in record["layers"])
        base = Base(config, layers)
        self._bases[pin.digest] = base
        return base

    def ensure_pulled(self, ref: str) -> None:
        if self.engine.inspect(ref) is not None:
            return
        registry = parse_image_ref(ref).registry
        try:
            self.engine.pull(ref, registry_credentials(registry))
        except EngineBuildError as exc:
            raise BuildFailed(f"cannot pull the base {ref}: {exc.message}",
                              hint=f"check access to {registry} (`docker login {registry}`)") from None

    def _learn(self, ref: str) -> JsonDoc:
        """The base's config and layer sizes, from one streamed `docker save`."""
        sizes: dict[str, tuple[str, int]] = {}
        configs: dict[str, bytes] = {}
        order: list[str] = []
        config_name = ""
        with self.engine.save(ref) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if member.name.endswith("/layer.tar") and member.isreg():
                    digest = hashlib.sha256()
                    handle = tar.extractfile(member)
                    assert handle is not None
                    while block := handle.read(1 << 20):
                        digest.update(block)
                    sizes[member.name] = ("sha256:" + digest.hexdigest(), member.size)
                elif member.name.endswith(".json") and "/" not in member.name and member.name != "manifest.json":
                    handle = tar.extractfile(member)
                    assert handle is not None
                    configs[member.name] = handle.read()
                elif member.name == "manifest.json":
                    handle = tar.extractfile(member)
                    assert handle is not None
                    manifest = json.loads(handle.read())[0]
                    order, config_name = manifest["Layers"], manifest["Config"]
        return {"config": configs[config_name].decode(), "layers": [list(sizes[name]) for name in order]}

    # -- chains --------------------------------------------------------------------------------
    def layers(self, env: EnvNode) -> list[Layer]:
        """The layers of `env`, its base's first; refused when Docker could not hold them."""
        base = list(self.base(env.base).layers)
        out = list(base)
        for node in env.layers:
            blobs = layer_blobs(self.store, node)
            if blobs is None:
                raise BuildFailed(f"layer {node.name} of {env.role} is not built")
            out += [Layer(f"sha256:{sha}", size, f"enginebuild: {node.name}", sha) for sha, size in blobs]
        if len(out) > MAX_DEPTH:
            raise BuildFailed(f"the {env.role} image would be {len(out)} layers deep (its base's {len(base)}, "
                              f"enginebuild's {len(out) - len(base)}): Docker's layer store refuses an image deeper "
                              f"than {MAX_DEPTH} (\"max depth exceeded\"), on every machine that pulls it",
                              hint="fewer layers: each steps: entry and each files: entry is one; a base with "
                                   "fewer layers; or python packages grouped (plan/wheelgroups.py)")
        return out

    def holds(self, env: EnvNode, known: set[str]) -> bool:
        """Whether the engine's chain image of `env` has exactly the layers the store records.

        A chain tag names inputs; a command that is not reproducible makes other bytes from the
        same inputs (another machine's build, a reproduce run), so the tag alone is not trusted.
        A tag that disagrees is forgotten and the chain is loaded again."""
        if env.tip not in known:
            return False
        found = self.engine.inspect(f"{CHAIN_REPO}:{env.tip}")
        expected = [layer.diff_id for layer in self.layers(env)]
        if found and list((found.get("RootFS") or {}).get("Layers") or []) == expected:
            return True
        known.discard(env.tip)
        return False

    def present(self, env: EnvNode, known: set[str]) -> int:
        """How many of the chain's layers the engine has (by the chain images it holds)."""
        count = len(self.base(env.base).layers)
        have = 0
        for i in range(len(env.layers) - 1, -1, -1):
            if self.holds(env.prefix(env.layers[i].chain), known):
                have = i + 1
                break
        for node in env.layers[:have]:
            count += len(layer_blobs(self.store, node) or [])
        return count

    def config_for(self, env: EnvNode, settings_given: ImageSettings | None = None,
                   base: Base | None = None) -> ImageConfig:
        """The config of `env` with the spec's settings (`settings_given`) over its base's (`base`: in its stead,
        SCRATCH for what the spec alone sets, known before anything is built or pulled)."""
        base = self.base(env.base) if base is None else base
        body = dict(base.config.get("config") or {})
        named = Platform.parse(env.platform).oci()
        settings = of_base(body)
        env_vars = dict(str(item).split("=", 1) for item in settings.get("Env") or [] if "=" in str(item))
        env_vars.update(dict(env.env))
        env_vars.setdefault("PATH", DEFAULT_PATH)  # as BuildKit sets it on an image that has none
        settings["Env"] = [f"{k}={v}" for k, v in env_vars.items()]
        if settings_given:
            settings = laid_over(settings, settings_given.values, settings_given.labels_removed)
        return ImageConfig(architecture=named["architecture"], variant=named.get("variant"), settings=settings,
                           base_history=base.history)

    def load(self, env: EnvNode, config: ImageConfig, tags: list[str], known: set[str], quiet: bool = False) -> str:
        """Load the chain as an image with these tags (and its chain tag); returns its image ID.
        A stored layer is sent as it is when its file is as it was found whole (the engine hashes
        what it receives against the config's diff IDs and refuses a mismatch); otherwise re-hashed."""
        layers = self.layers(env)
        present = self.present(env, known)
        for layer in layers[present:]:
            if layer.blob is None:
                raise BuildFailed("a base layer is missing from the engine; pull the base again")
            if not self.store.intact(layer.blob, layer.created_by):
                self.store.verified(layer.blob, layer.created_by)
        data = config.render(layers)
        self.rendered = (data, layers)  # what the image is made of, for the plan memo's file-edit path
        image_id = image_id_of(data)
        all_tags = tags + [f"{CHAIN_REPO}:{env.tip}"]
        enginetags.made(self.store, all_tags[-1])  # the chain tag: this store's to collect (`gc`)
        first = self.engine.image_id(all_tags[0])
        self.before = first if tags else None  # the image the image's tag named until now
        if self.before and self.before != image_id:  # its layers, to say whether only the config changed
            held = (self.engine.inspect(self.before) or {}).get("RootFS") or {}
            self.before_layers = [str(d) for d in held.get("Layers") or []]
        if first == image_id and all(self.engine.image_id(t) == image_id for t in all_tags):
            return image_id
        chain_before = self.engine.image_id(all_tags[-1])  # a chain image this load takes the tag of
        archive = DockerArchive(data, layers, present, self.store.path, all_tags)
        shown: contextlib.AbstractContextManager[Work | None] = \
            contextlib.nullcontext() if quiet else Work(output(), "loading into the engine")
        with shown as work:
            self.engine.load(counted(archive.chunks(), work, archive.size), archive.size)
        if chain_before and chain_before != image_id:
            # left untagged, it would keep every layer of the chain after the image is removed; the
            # engine keeps it if anything else still names or uses it
            self.engine.remove(chain_before)
        known.add(env.tip)
        return image_id


def counted(chunks: Iterator[bytes | memoryview], work: Work | None, total: int) -> Iterator[bytes | memoryview]:
    """The chunks, saying on `work`'s line how much of `total` went through."""
    sent = 0
    for chunk in chunks:
        yield chunk
        sent += len(chunk)
        if work is not None:
            work.detail = f"{human_bytes(sent)} of {human_bytes(total)}"
