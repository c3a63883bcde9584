"""Fetching, separate from building: every pinned file a plan needs lands in the store, verified.

A second fetch costs nothing: stored files are re-hashed, and a damaged one is deleted,
named and fetched again. Python requirements pinned to a git commit are built into a
wheel here, on the host (a pure-Python wheel; anything else belongs in a component).
"""

from __future__ import annotations

import functools
import io
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.errors import BuildFailed
from enginebuild.io import proc
from enginebuild.io.background import Background, settled
from enginebuild.io.git import Mirror, Mirrors, git
from enginebuild.io.http import Http
from enginebuild.io.store import Store
from enginebuild.layerkinds.base import Download
from enginebuild.layerkinds.context import FromBlob, FromSource
from enginebuild.lock.pins import PyPin
from enginebuild.lock.python import uv_binary
from enginebuild.plan.model import ComponentNode, EnvNode, ImagePlan, LayerNode
from enginebuild.sources.pyindex import find_file

AHEAD = 4  # downloads at once: several streams fill a link one stream leaves idle
STOP_WAIT_S = 10.0  # how long downloads in flight get to stop and remove their partial files


@dataclass
class Fetcher:
    store: Store
    http: Http = field(default_factory=Http)
    fetched: list[str] = field(default_factory=list)
    cached: int = 0
    counting: threading.Lock = field(default_factory=threading.Lock)

    def download(self, d: Download, cancelled: Callable[[], bool] | None = None) -> Path:
        if self.store.check(d.sha256, d.what):
            with self.counting:
                self.cached += 1
            return self.store.path(d.sha256)
        alternatives = (lambda: find_file(self.http, d.index, d.project, d.filename, d.sha256)) if d.index else None
        path = self.store.fetch(self.http, list(d.urls), d.sha256, d.what, d.size, alternatives=alternatives,
                                cancelled=cancelled)
        with self.counting:
            self.fetched.append(d.what)
        return path

    def all(self, downloads: Iterable[Download]) -> None:
        """Every one of `downloads` in the store, AHEAD at a time."""
        wanted = list(downloads)
        with Prefetch(self, wanted) as ahead:
            ahead.wait(wanted)

    def git_wheel(self, home: Path, pin: PyPin, mirrors: Mirrors) -> None:
        """A wheel of a Python package pinned to a git commit, built on the host with uv."""
        key = f"{pin.name}-{pin.commit}"
        record = self.store.record("built-wheels", key)
        if record and self.store.check(str(record["sha256"]), str(record["filename"])):
            return
        mirror = Mirror(home, pin.url, mirrors)
        mirror.fetch_commit(pin.commit)
        folder = Path(tempfile.mkdtemp(prefix="enginebuild-gitwheel-"))
        try:
            exported = git(["archive", "--format=tar", pin.commit], cwd=mirror.path,
                           what=f"exporting {pin.name} at {pin.commit[:12]}").stdout
            with tarfile.open(fileobj=io.BytesIO(exported)) as tar:
                tar.extractall(folder / "src", filter="data")
            proc.run([uv_binary(), "build", "--wheel", "--out-dir", str(folder / "dist"), str(folder / "src")],
                     env={"UV_PYTHON_DOWNLOADS": "never", "SOURCE_DATE_EPOCH": "1"},
                     what=f"building a wheel of {pin.name} at {pin.commit[:12]}")
            wheels = list((folder / "dist").glob("*.whl"))
            if len(wheels) != 1 or not wheels[0].name.endswith("-none-any.whl"):
                raise BuildFailed(f"{pin.name} at {pin.commit[:12]} did not build into one pure-Python wheel",
                                  hint="build it in a component and require it with `component:`")
            blob = self.store.put_bytes(wheels[0].read_bytes(), wheels[0].name)
            self.store.put_record("built-wheels", key, {"sha256": blob.sha256, "filename": wheels[0].name})
        finally:
            shutil.rmtree(folder, ignore_errors=True)


class Prefetch:
    """Downloads started ahead of the steps that need them, AHEAD at a time, in the order the
    steps come: an environment's wheels arrive while its earlier layers are being written.
    `wait` returns once a step's files are in the store (fetching any not started ahead).
    Leaving the context after an error or a signal: those not started never start, those in
    flight stop at their next block and remove their partial files (waited for, STOP_WAIT_S at
    most)."""

    def __init__(self, fetcher: Fetcher, downloads: Iterable[Download], workers: int = AHEAD):
        self.fetcher = fetcher
        self.background = Background(workers, "enginebuild-fetch")
        self.futures: dict[str, Future[Path]] = {}
        for d in downloads:
            if d.sha256 not in self.futures:
                self.futures[d.sha256] = self.background.submit(
                    functools.partial(fetcher.download, d, self.background.cancelled.is_set))

    def wait(self, downloads: Iterable[Download]) -> None:
        for d in downloads:
            future = self.futures.get(d.sha256)
            if future is None:
                self.fetcher.download(d)
            else:
                settled(future)

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.background.cancel(wait_s=STOP_WAIT_S)


def layer_downloads(layer: LayerNode) -> list[Download]:
    return layer.payload.downloads()


def env_downloads(env: EnvNode, only: set[str] | None = None) -> list[Download]:
    return [d for layer in env.layers if only is None or layer.chain in only for d in layer_downloads(layer)]


def component_downloads(comp: ComponentNode) -> list[Download]:
    out = []
    for item in comp.context:
        if isinstance(item.origin, FromBlob):
            out.append(Download(item.origin.sha256, item.origin.urls, item.origin.what, item.origin.size))
        elif isinstance(item.origin, FromSource):  # a source's own files (an sdist, a URL archive)
            o = item.origin
            out += [Download(sha, tuple(urls), what, size) for sha, urls, what, size in o.source.downloads()]
    return out + ([] if comp.release is not None else env_downloads(comp.builder))


def plan_downloads(plan: ImagePlan) -> list[Download]:
    out = []
    for comp in plan.components:
        out += component_downloads(comp)
    return out + env_downloads(plan.runtime)


def git_wheels(env: EnvNode) -> list[PyPin]:
    return [pin for layer in env.layers for pin in layer.payload.git_pins()]
