"""Rebuild an image from its lock, with nothing reused, and compare it layer by layer with the
image built before (or pushed: `--against REPO@sha256:...`).

The rebuild runs in a scratch home whose store shares only the downloads (pinned files,
verified on use) and git mirrors: every derived tree, patched tree, component output and
layer is made again, BuildKit runs without its cache, and the builder chains it loads are
untagged afterwards. Same lock, same bytes: the layers' digests and the image config's
digest must be equal; where they are not, the layer, its stage and its first differing
files are named.
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.errors import BuildFailed, command
from enginebuild.execution.assemble import Assembler
from enginebuild.execution.executor import Executor, final_config
from enginebuild.execution.fetch import git_wheels
from enginebuild.execution.layerdiff import differences
from enginebuild.execution.secretscan import Scanner
from enginebuild.io.files import temp_path
from enginebuild.io.git import Mirrors
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.oci.engine import Engine
from enginebuild.oci.image import Layer, image_id_of
from enginebuild.oci.reference import ImageRef
from enginebuild.oci.registry import RegistryClient
from enginebuild.plan.model import ImagePlan
from enginebuild.wire import JsonDoc, loads

SHARED = ("cas", "git")  # verified downloads and mirrors of pinned commits: safe to share


@dataclass
class LayerVerdict:
    index: int
    stage: str
    expected: str
    actual: str
    diff: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return self.expected == self.actual


@dataclass
class Reproduction:
    image: str
    platform: str
    against: str
    layers: list[LayerVerdict]
    config_expected: str
    config_actual: str
    seconds: float

    @property
    def ok(self) -> bool:
        return all(v.same for v in self.layers) and self.config_expected == self.config_actual

    def lines(self) -> list[str]:
        out = [f"{self.image} ({self.platform}): rebuilt from the lock with nothing reused in {self.seconds:.1f}s, "
               f"compared with {self.against}"]
        for v in self.layers:
            mark = "same   " if v.same else "DIFFERS"
            out.append(f"  {mark} layer {v.index} {v.stage}: {v.actual[:19]}"
                       + ("" if v.same else f" (expected {v.expected[:19]})"))
            out += [f"      {line}" for line in v.diff]
        if self.config_expected != self.config_actual and all(v.same for v in self.layers):
            out.append(f"  DIFFERS image config: {self.config_actual[:19]} (expected {self.config_expected[:19]})")
        verdict = (f"reproducible: {len(self.layers)} layers and the config ({self.config_actual[:19]}) are identical"
                   if self.ok else "NOT reproducible")
        out.append(f"{self.image} ({self.platform}): {verdict}")
        return out

    def to_json(self) -> JsonDoc:
        return {"image": self.image, "platform": self.platform, "against": self.against, "ok": self.ok,
                "seconds": round(self.seconds, 1), "config": {"expected": self.config_expected,
                                                              "actual": self.config_actual},
                "layers": [{"index": v.index, "stage": v.stage, "expected": v.expected, "actual": v.actual,
                            "same": v.same, "differences": v.diff} for v in self.layers]}


@dataclass
class Reference:
    """The image to compare with: its layers' uncompressed digests, its config digest, and a way
    to get one layer as an uncompressed tar (to name its differing files)."""

    what: str
    diff_ids: list[str]
    config: str
    layer_tar: Callable[[int, Path], Path]
    stages: list[str]


def scratch_home(home: Path) -> Path:
    folder = temp_path(home / "tmp", "reproduce", "d")
    folder.mkdir(parents=True)
    for name in SHARED:
        (home / name).mkdir(parents=True, exist_ok=True)
        (folder / name).symlink_to(home / name)
    return folder


def rebuild(home: Path, plan: ImagePlan, scanner: Scanner, jobs: int | None,
            mirrors: Mirrors = ()) -> tuple[Path, list[Layer], str]:
    """(scratch home, the rebuilt runtime layers, the rebuilt config's digest)."""
    folder = scratch_home(home)
    executor = Executor(folder, scanner=scanner, fresh=True, jobs=jobs, mirrors=mirrors)
    try:
        executor.components(plan)
        for pin in git_wheels(plan.runtime):
            executor.fetcher.git_wheel(folder, pin, executor.mirrors)
        executor.make_chain(plan.runtime, plan)
        layers = executor.assembler.layers(plan.runtime)
        config = final_config(executor.assembler, plan).render(layers)
    finally:
        executor.forget_loaded_chains()
    return folder, layers, image_id_of(config)


def local_reference(home: Path, plan: ImagePlan) -> Reference:
    store = Store(home)
    assembler = Assembler(Engine(), store)
    try:
        layers = assembler.layers(plan.runtime)
    except BuildFailed:
        raise BuildFailed(f"{plan.image} ({plan.platform}) is not built here to compare with",
                          hint=f"run `{command()} image {plan.image}` first, or give --against REPO@sha256:...")
    config = final_config(assembler, plan).render(layers)

    def layer_tar(index: int, folder: Path) -> Path:
        blob = layers[index].blob
        if blob is None:
            raise BuildFailed("a base layer cannot be compared file by file")
        return store.verified(blob, layers[index].created_by)

    return Reference("the image built here", [layer.diff_id for layer in layers],
                     image_id_of(config), layer_tar, [layer.created_by for layer in layers])


def remote_reference(ref: ImageRef, platform: str) -> Reference:
    client = RegistryClient()
    _, manifest, _ = client.platform_manifest(ref, platform)
    config_digest = manifest["config"]["digest"]
    config = loads(client.read_blob(ref, config_digest))
    descriptors = manifest["layers"]
    history = [h.get("created_by", "") for h in config.get("history", []) if not h.get("empty_layer")]

    def layer_tar(index: int, folder: Path) -> Path:
        target = folder / f"remote-{index}.tar"
        with client.open_blob(ref, descriptors[index]["digest"]) as response, open(target, "wb") as sink:
            raw = response.raw
            raw.decode_content = True
            stream = gzip.GzipFile(fileobj=raw) if "gzip" in descriptors[index].get("mediaType", "gzip") else raw
            shutil.copyfileobj(stream, sink, 1 << 20)
        return target

    stages = history if len(history) == len(descriptors) else [""] * len(descriptors)
    return Reference(str(ref), list(config["rootfs"]["diff_ids"]), config_digest, layer_tar, stages)


def compare(plan: ImagePlan, reference: Reference, rebuilt: list[Layer], config: str, folder: Path,
            seconds: float) -> Reproduction:
    verdicts = []
    count = max(len(rebuilt), len(reference.diff_ids))
    work = Path(tempfile.mkdtemp(prefix="enginebuild-reproduce-"))
    try:
        for index in range(count):
            actual = rebuilt[index].diff_id if index < len(rebuilt) else "(none)"
            expected = reference.diff_ids[index] if index < len(reference.diff_ids) else "(none)"
            stage = rebuilt[index].created_by if index < len(rebuilt) else reference.stages[index]
            verdict = LayerVerdict(index + 1, stage.removeprefix("enginebuild: "), expected, actual)
            if not verdict.same and index < len(rebuilt) and index < len(reference.diff_ids):
                mine = rebuilt[index].blob
                if mine is not None:
                    verdict.diff = differences(reference.layer_tar(index, work),
                                               Store(folder).verified(mine, stage))
            verdicts.append(verdict)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Reproduction(plan.image, plan.platform, reference.what, verdicts, reference.config, config, seconds)


def reproduce(home: Path, plan: ImagePlan, scanner: Scanner, against: ImageRef | None,
              jobs: int | None = None, mirrors: Mirrors = ()) -> Reproduction:
    reference = remote_reference(against, plan.platform) if against else local_reference(home, plan)
    start = time.monotonic()
    output().say(f"  {plan.image} ({plan.platform}): rebuilding from the lock with nothing reused ...")
    folder, layers, config = rebuild(home, plan, scanner, jobs, mirrors)
    try:
        return compare(plan, reference, layers, config, folder, time.monotonic() - start)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
