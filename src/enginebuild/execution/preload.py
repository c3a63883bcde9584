"""Loading a chain into the engine while its later layers are still being written.

Each time the layers made so far form a longer prefix of the chain, that prefix is loaded as a
chain image (`enginebuild/chain:<tip>`), one load at a time, each sending only the layers the
engine lacks; the final load of the image then sends only what came after the last prefix. The
engine registering gigabytes of layers (a real vLLM closure) thus overlaps the writing of the
next ones instead of following all of them. A prefix whose new layers are small (a patch's files,
the manifest) is not loaded ahead: a load costs the engine's round trips whatever its size, so
those layers go with the image's own load. A prefix is searched for the spec's secrets before
it is loaded, as the whole image is before it is tagged.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

from enginebuild.io.background import Background, settled
from enginebuild.plan.envs import CHAIN_REPO
from enginebuild.plan.stored import layer_blobs

if TYPE_CHECKING:
    from enginebuild.execution.secretscan import Scanner
    from enginebuild.execution.sites import Site
    from enginebuild.plan.model import EnvNode


# below this many bytes of new layers, loading a prefix ahead costs more (one more load, its round
# trips) than it overlaps: q1's two small layers took 0.24 s loaded ahead, against ~0.1 s for the
# image's own load carrying them
AHEAD_MIN_BYTES = 32 << 20


class Preloader:
    def __init__(self, site: Site, env: EnvNode, scanner: Scanner | None, what: str):
        self.site, self.env, self.scanner, self.what = site, env, scanner, what
        self.lock = threading.Lock()
        self.pending: EnvNode | None = None  # the longest made prefix not yet handed to a load
        self.active = False  # a drain is running (or about to)
        self.drains: list[Future[None]] = []
        self.background = Background(1, "enginebuild-preload")
        self.upto = 0  # how many of the chain's layers the loads so far took into the engine

    def offer(self, index: int) -> None:
        """Layers 0..index of the chain are made and recorded."""
        with self.lock:
            self.pending = self.env.prefix(self.env.layers[index].chain)
            if not self.active:
                self.active = True
                self.drains.append(self.background.submit(self._drain))

    def _drain(self) -> None:
        while True:
            with self.lock:
                target, self.pending = self.pending, None
                if target is None:
                    self.active = False
                    return
            try:
                self._load(target)
            except BaseException:
                with self.lock:
                    self.active = False
                raise

    def _load(self, target: EnvNode) -> None:
        site = self.site
        with site.chain_lock:
            if any(node.chain in site.known for node in self.env.layers[len(target.layers) - 1:]):
                return  # the engine has this prefix or a longer one (a chain image of an earlier build)
            if self._new_bytes(target) < AHEAD_MIN_BYTES:
                return  # left to a longer prefix or to the image's own load
            if self.scanner is not None:
                self.scanner.check_layers([(la.blob, la.created_by) for la in site.assembler.layers(target)
                                           if la.blob], self.what)
            site.assembler.load(target, site.assembler.config_for(target), [], site.known, quiet=True)
            site.loaded.append(f"{CHAIN_REPO}:{target.tip}")
            self.upto = max(self.upto, len(target.layers))

    def _new_bytes(self, target: EnvNode) -> int:
        """Bytes of the prefix's layers the engine lacks (after the longest prefix it holds)."""
        start = self.upto
        for i in range(len(target.layers) - 1, start - 1, -1):
            if target.layers[i].chain in self.site.known:
                start = i + 1
                break
        store = self.site.assembler.store
        return sum(size for node in target.layers[start:] for _, size in layer_blobs(store, node) or [])

    def finish(self) -> None:
        """Wait for the loads under way; the first failure is raised."""
        for drain in list(self.drains):
            settled(drain)

    def cancel(self, wait_s: float = 0.0) -> None:
        self.background.cancel(wait_s)
