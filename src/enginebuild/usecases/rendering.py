"""Writing an image's builds as folders `docker build` takes (`render --out`): each component's
and command layer's Dockerfile with its complete context, and the runtime's last part (manifest,
files, settings) as a context buildable on the chain below it.

BuildKit sends a context folder incrementally: a file whose path, size, mode and mtime equal
what it received before from the same folder is not sent again. Our contexts carry fixed time
stamps (reproducible layers), so an edit that keeps a file's size, rendered again into the same
folder, would build from the old bytes. Two rules keep every rendered build honest:
- the runtime's files sit in folders named by their layer's content key (`files/07-<key>/`,
  `manifest-<key>/`): a changed layer is a new path, and the files keep the time stamp the
  image has;
- a build context's files (sources as tars, scripts, step files) get a time stamp derived from
  their content: the same bytes, the same stamp (BuildKit reuses what it has), other bytes, another.
Each folder is replaced whole, so nothing from an earlier render is left in it."""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
from io import BytesIO
from pathlib import Path

from enginebuild.errors import EngineBuildError
from enginebuild.execution.executor import Executor
from enginebuild.execution.fetch import plan_downloads
from enginebuild.execution.materialize import Materializer
from enginebuild.execution.secretscan import Scanner
from enginebuild.io.store import Store
from enginebuild.io.tars import TarWriter
from enginebuild.layerkinds.context import ContextItem
from enginebuild.plan.model import ImagePlan
from enginebuild.plan.views import tail_dockerfile, tail_folder, tail_start
from enginebuild.workspace import Workspace

STAMP_SPAN_NS = 10**15  # content-derived stamps fall within ~11.6 days after the epoch's


def write_contexts(ws: Workspace, plan: ImagePlan, folder: Path) -> list[str]:
    """Every build context of `plan` (components, command layers, the runtime's tail) under
    `folder`, each in a folder of its own: what each is, in build order (a line each)."""

    executor = Executor(ws.home, mirrors=ws.mirrors, scanner=Scanner(ws.spec(plan.image), store=Store(ws.home)))
    executor.fetcher.all(plan_downloads(plan))
    outputs = {c.key: r.sha256 for c in plan.components if (r := executor.output_record(c))}  # checked once
    materializer = Materializer(ws.context(executor.http, plan.epoch), plan.image, outputs)
    builds = [(f"component-{c.name}", c.dockerfile, c.context) for c in plan.components]
    builds += [(f"layer-{n.name}", c.dockerfile, c.context) for n in plan.runtime.layers
               if (c := n.payload.commands())]
    written = []
    names = [f"{i:02d}-{''.join(c if c.isalnum() or c in '.-' else '-' for c in name)}"
             for i, (name, _, _) in enumerate(builds, 1)] + ["runtime-tail"]
    forget_earlier_render(folder, names)
    for target_name, (_, dockerfile, context) in zip(names, builds, strict=False):
        written.append(write_build_context(materializer, fresh(folder / target_name), dockerfile, context, plan.epoch))
    written.append(write_tail(executor, plan, fresh(folder / "runtime-tail")))
    return written


RENDERED = ".enginebuild-rendered"  # the folders the last render wrote here, a name a line


def forget_earlier_render(folder: Path, names: list[str]) -> None:
    """Remove the folders an earlier render wrote into `folder` that this one does not write (another
    image's, or a component this plan no longer has), by the list it kept; then keep this one's."""
    listing = folder / RENDERED
    before = listing.read_text().split("\n") if listing.is_file() else []
    for name in before:
        if name and name not in names and "/" not in name and name not in (".", ".."):
            old = folder / name
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{n}\n" for n in names)
    if before != text.split("\n"):  # the same builds: the file as it was (its time stamp too)
        listing.write_text(text)


def fresh(target: Path) -> Path:
    """An empty folder at `target` (what an earlier render left there is removed)."""
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    return target


def write_build_context(materializer: Materializer, target: Path, dockerfile: str,
                        context: tuple[ContextItem, ...], epoch: int) -> str:
    """One BuildKit build's folder; what it prints about it."""
    buffer = BytesIO()
    try:
        materializer.write_context(buffer, dockerfile, context)
    except EngineBuildError as exc:  # an output not built yet: the Dockerfile alone still helps
        (target / "Dockerfile").write_text(dockerfile)
        return f"{target}  (context incomplete: {exc.message})"
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        tar.extractall(target, filter="data")
    stamp_by_content(target, epoch)
    return str(target)


def stamp_by_content(folder: Path, epoch: int) -> None:
    """Give each file a time stamp derived from its bytes (see the module's note)."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        with open(path, "rb") as handle:  # streamed: a source tree's tar may be GBs
            digest = hashlib.file_digest(handle, "sha256").digest()
        stamp = epoch * 10**9 + int.from_bytes(digest[:8], "big") % STAMP_SPAN_NS
        os.utime(path, ns=(stamp, stamp))


def write_tail(executor: Executor, plan: ImagePlan, tail: Path) -> str:
    (tail / "Dockerfile").write_text(tail_dockerfile(plan))
    buffer = BytesIO()
    writer = TarWriter(buffer, implied_dirs=True)
    start = tail_start(plan)
    for i, node in enumerate(plan.runtime.layers[start:], start):
        where = tail_folder(node, i)
        for entry in node.payload.tail_files():
            if entry.data is not None:
                writer.add_bytes(f"{where}{entry.dest}", entry.data)
            else:
                writer.add_file(f"{where}{entry.dest}", entry.path or executor.store.path(entry.sha256 or ""), entry.mode)
    writer.close()
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        tar.extractall(tail, filter="tar")
    if not start:
        return str(tail)
    try:  # the tail builds FROM the chain below it: put that chain in the engine when it is built
        ref = executor.load_chain(plan.runtime.prefix(plan.runtime.layers[start - 1].chain))
    except EngineBuildError as exc:
        return f"{tail}  (FROM needs the layers below it in the engine: {exc.message}; build the image first)"
    return f"{tail}  (FROM {ref}: loaded in the engine)"
