"""Compiler caches that travel: a component's `build.cache` folders (ccache, sccache) outlive the
machine that filled them.

On one machine they are BuildKit cache mounts. After a build, each folder is also taken out of
the component's image as a tar (the Dockerfile writes it there; a folder over 4 GiB is not) and
kept in the store under the component's *cache key* — its name, platform and builder
environment, not its key: the point is reuse across changes. With a registry cache, it is pushed
there too (tag `cc-<cache key>`, replaced by each build). Before a build, the newest one known
(the store's, else the registry's) goes into the build context, and the Dockerfile fills each
cache folder that is empty from it. A seed that does not hash to its digest is ignored (the
build runs without it, as on a fresh machine); carrying a cache never fails a build.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from enginebuild.errors import EngineBuildError, SecretLeak
from enginebuild.io.progress import human_bytes, output
from enginebuild.io.store import Store
from enginebuild.oci.engine import EngineApi
from enginebuild.oci.image import OCI_LAYER_TAR
from enginebuild.plan.components import CACHE_OUT
from enginebuild.plan.model import ComponentNode
from enginebuild.registrycache.cache import LayerCache
from enginebuild.registrycache.cacherecords import COMPILER_CACHE

KIND = COMPILER_CACHE


def tag_of(comp: ComponentNode) -> str:
    return f"cc-{comp.cache_key}"


class CompilerCaches:
    def __init__(self, store: Store, cache: LayerCache | None = None):
        self.store, self.cache = store, cache

    def seeds(self, comp: ComponentNode) -> list[tuple[str, Path]]:
        """(context path, file) of each folder's last tar, or nothing."""
        record = self.store.record(KIND, comp.cache_key)
        if record is None and self.cache is not None:
            try:
                found = self.cache.fetch_entry(tag_of(comp), KIND, self.store)
            except EngineBuildError as exc:
                output().say(f"  component {comp.name}: compiler cache in {self.cache.name} ignored ({exc.message})")
                found = None
            if found is not None:
                self.store.put_record(KIND, comp.cache_key, found)
                record = found
        if record is None:
            return []
        tars = [(int(i), str(sha), int(size)) for i, sha, size in record.get("tars") or ()]
        if not all(self.store.check(sha, f"compiler cache of {comp.name}") for _, sha, _ in tars):
            output().say(f"  component {comp.name}: a stored compiler cache is damaged; building without it")
            return []
        if tars:
            output().say(f"  component {comp.name}: compiler cache restored from {record.get('from', 'this machine')} "
                         f"({human_bytes(sum(s for _, _, s in tars))})")
        return [(f"compiler-cache/{i}.tar", self.store.path(sha)) for i, sha, _ in tars]

    def keep(self, engine: EngineApi, tag: str, comp: ComponentNode) -> None:
        """Take each folder's tar out of the built image, keep it, and push it to the registry cache."""
        try:
            tars = self._take(engine, tag, comp)
        except (EngineBuildError, OSError, tarfile.TarError) as exc:
            output().say(f"  component {comp.name}: compiler cache not kept ({exc})")
            return
        if not tars:
            return
        record = {"tars": [list(t) for t in tars], "name": comp.name}
        self.store.put_record(KIND, comp.cache_key, record)
        if self.cache is None or not self.cache.push_enabled:
            return
        try:
            self.cache.push_entry(tag_of(comp), KIND, {**record, "from": self.cache.name},
                                  [(sha, size, OCI_LAYER_TAR) for _, sha, size in tars], self.store,
                                  f"compiler cache of component {comp.name}")
            output().say(f"  component {comp.name}: compiler cache pushed to {self.cache.name} "
                         f"({human_bytes(sum(s for _, _, s in tars))})")
        except SecretLeak:
            raise  # a secret in the cache folders fails the build, as one in a layer does
        except EngineBuildError as exc:
            output().say(f"  component {comp.name}: compiler cache not pushed ({exc.message})")

    def _take(self, engine: EngineApi, tag: str, comp: ComponentNode) -> list[tuple[int, str, int]]:
        out = []
        with engine.container(tag) as container, engine.archive(container, CACHE_OUT) as stream:
            if stream is None:
                return []
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for member in tar:
                    name = member.name.rsplit("/", 1)[-1]
                    if not (member.isreg() and name.endswith(".tar") and name[:-4].isdigit()):
                        continue
                    handle = tar.extractfile(member)
                    assert handle is not None
                    with self.store.ingest(f"compiler cache of {comp.name}") as sink:
                        while block := handle.read(1 << 20):
                            sink.write(block)
                    out.append((int(name[:-4]), sink.hexdigest(), member.size))
        return sorted(out)
