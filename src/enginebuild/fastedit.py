"""The answer to `BUILD.py image NAME...` when only files that `files:` copies changed.

Editing a launch script and rebuilding is what recipe authors do most. The bytes of a files
layer are a deterministic tar enginebuild writes itself, so nothing needs planning or a
builder: the plan memo (state/memo.py) says which files changed, and the edit record stored
with it (written by `record` after every full build) says which layer holds each of them,
the image's config and the layers below and above. This path hashes only the changed files,
writes the new layer into the store (the same tar, key and record a full build writes),
computes the new chain keys and config, and loads the image with one `docker load` that
carries only that layer. The image ID is the one a full build gives.

Anything else goes the full way: a changed spec, lock, patch or script of a component, a
folder or glob that now lists other files, a file whose mode now differs, a command layer
(a step) above the changed layer (it depends on everything below it), an engine that lacks
the image as last built, or any error at all (answer returns None and the full command runs).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild.plan.editrecord import EditFile, EditNode, EditRecord, Listing, StoredLayer
from enginebuild.state.decision import Decision, FilesEdited
from enginebuild.state.memo import ImageRun, PlanMemo

if TYPE_CHECKING:
    from enginebuild.execution.runstate import Outcome
    from enginebuild.io.store import Store
    from enginebuild.oci.engine import EngineApi
    from enginebuild.plan.model import ImagePlan
    from enginebuild.recipe.model import ImageSpec

ELF = b"\x7fELF"


# -- what a full build leaves for this path ------------------------------------------------
def record(store: Store, spec: ImageSpec, plan: ImagePlan, outcome: Outcome, only_copied: list[str]) -> EditRecord:
    """What the next file edit needs to remake this image without planning (stored in the memo);
    `only_copied`: the inputs that only `files:` reads, the only ones that may change this way."""
    from enginebuild.plan.envs import CHAIN_REPO
    from enginebuild.plan.stored import layer_blobs

    nodes = []
    for node in plan.runtime.layers:
        copied = node.payload.copied_files()
        files = tuple(EditFile(e.dest, e.mode, e.mode_given, e.display, str(e.src) if e.src else None,
                               node.inputs[f"file {e.display}"]) for e in copied) if copied else None
        nodes.append(EditNode(node.name, node.key, node.chain, dict(node.inputs), len(layer_blobs(store, node) or []),
                              node.by_command, files))
    listings = tuple(Listing(g.listing[0], str(g.listing[1]), str(g.listing[2]), tuple(str(e.src) for e in g.entries))
                     for g in spec.files if g.listing)
    return EditRecord(platform=plan.platform, tag=plan.tag, chain_repo=CHAIN_REPO, root=plan.runtime.root,
                      epoch=plan.epoch, config=outcome.config.decode(),
                      layers=tuple(StoredLayer(la.diff_id, la.size, la.created_by, la.blob) for la in outcome.layers),
                      nodes=tuple(nodes), listings=listings, only_copied=tuple(only_copied))


class NotThisWay(Exception):
    """The full command is needed (the message says why, for ENGINEBUILD_DEBUG)."""


# -- replaying it ---------------------------------------------------------------------------
def _same_listings(edits: list[EditRecord]) -> None:
    """A changed folder is harmless when every glob and folder copied lists the same files."""
    from enginebuild.recipe.listing import listed

    for edit in edits:
        for listing in edit.listings:
            if tuple(str(p.resolve()) for p in listed(listing.kind, Path(listing.folder), listing.pattern)) \
                    != listing.srcs:
                raise NotThisWay(f"{listing.folder}: other files than last time")


class Replay:
    def __init__(self, store: Store, engine: EngineApi, contents: dict[str, bytes]):
        self.store, self.engine, self.contents = store, engine, contents

    def files_layer(self, node: EditNode, epoch: int) -> EditNode:
        """The node as its files are now (its key, inputs and files): keyed as a full build keys
        it, from the payload it would plan (only what its key reads is filled in)."""
        from enginebuild.io.files import image_mode
        from enginebuild.layerkinds.files import Files
        from enginebuild.plan.writers import layer_key
        from enginebuild.recipe.model import FileEntry

        assert node.files is not None
        files = []
        for f in node.files:
            if f.src is not None and f.src in self.contents:
                mode = f.mode if f.given else image_mode(os.stat(f.src).st_mode)
                f = replace(f, digest=hashlib.sha256(self.contents[f.src]).hexdigest(), mode=mode)
            files.append(f)
        key = layer_key(Files(tuple(FileEntry(f.dest, f.mode, f.display) for f in files),
                              tuple(f.digest for f in files)), epoch)
        inputs = {**node.inputs, **{f"file {f.display}": f.digest for f in files}}
        return replace(node, key=key, inputs=inputs, files=tuple(files))

    def write(self, node: EditNode, epoch: int) -> tuple[str, int]:
        """The layer's blob (the tar a full build writes), made unless the store has it."""
        from enginebuild.layerkinds.filelayer import FileItem, files_blob

        found = self.store.record("layers", node.key)
        if found and len(found["layers"]) == 1 and self.store.has(found["layers"][0][0]):
            sha, size = found["layers"][0]
            return str(sha), int(size)
        items = []
        for f in node.files or ():
            if f.src is not None and f.src in self.contents:
                items.append(FileItem(f.dest, f.mode, self.contents[f.src], None, f.display))
            elif f.src:
                items.append(FileItem(f.dest, f.mode, Path(f.src), f.digest, f.display))
            else:
                items.append(FileItem(f.dest, f.mode, self.store.verified(f.digest, f.display), None, f.display))
        blob = files_blob(self.store, node.name, epoch, items)
        self.store.put_record("layers", node.key, {"layers": [[blob.sha256, blob.size]], "name": node.name})
        return blob.sha256, blob.size

    def image(self, edit: EditRecord, tags: list[str]) -> tuple[EditRecord, str, int]:
        """The edit record after the change, the image ID and how many layers were written."""
        from enginebuild.core import keys
        from enginebuild.oci.image import canonical, image_id_of

        layers = list(edit.layers)
        at = len(layers) - sum(n.blobs for n in edit.nodes)
        parent, first, nodes, written = edit.root, None, [], 0
        for node in edit.nodes:
            if node.files and any(f.src in self.contents for f in node.files):
                fresh = self.files_layer(node, edit.epoch)
                if fresh.key != node.key:
                    if node.blobs != 1:
                        raise NotThisWay(f"{node.name}: {node.blobs} layers")
                    sha, size = self.write(fresh, edit.epoch)
                    layers[at] = StoredLayer(f"sha256:{sha}", size, layers[at].created_by, sha)
                    first = at if first is None else first
                    written += 1
                node = fresh
            elif node.run and first is not None:
                raise NotThisWay(f"{node.name} runs a command above a changed layer")
            chain = keys.chain(parent, node.key)
            if first is None and chain != node.chain:
                raise NotThisWay(f"{node.name}: the chain does not add up")
            nodes.append(replace(node, chain=chain))
            parent, at = chain, at + node.blobs
        config = json.loads(edit.config)
        if canonical(config) != edit.config.encode():
            raise NotThisWay("the config is not canonical")
        config["rootfs"]["diff_ids"] = [la.diff_id for la in layers]
        data = canonical(config)
        image_id = image_id_of(data)
        all_tags = tags + [f"{edit.chain_repo}:{parent}"]
        if first is not None and not all(self.engine.image_id(t) == image_id for t in all_tags):
            self.load(data, layers, first, all_tags)
        return replace(edit, config=data.decode(), layers=tuple(layers), nodes=tuple(nodes)), image_id, written

    def load(self, config: bytes, layers: list[StoredLayer], present: int, tags: list[str]) -> None:
        from enginebuild.oci.image import DockerArchive, Layer

        found = [Layer(la.diff_id, la.size, la.created_by, la.blob) for la in layers]
        archive = DockerArchive(config, found, present, self.store.path, tags)
        self.engine.load(archive.chunks(), archive.size)


def answer(memo: PlanMemo, key: str, name: str, home: Path, decision: Decision,
           engine: EngineApi | None = None) -> str | None:
    """Remake the images of `name`, whose decision is that only copied files were edited; the line
    to print, or None (the full command runs). `engine`: the one to load into (None: this machine's)."""
    from enginebuild.io.store import Store

    try:
        with Store(Path(home)).using():  # gc waits for this, as for every build
            return _answer(memo, key, name, home, decision, engine)
    except NotThisWay as why:
        if os.environ.get("ENGINEBUILD_DEBUG"):
            print(f"file-edit path not taken: {why}")
    except Exception as exc:  # noqa: BLE001 - any doubt: the full command decides, and says what is wrong
        if os.environ.get("ENGINEBUILD_DEBUG"):
            print(f"file-edit path not taken: {type(exc).__name__}: {exc}")
    return None


def _answer(memo: PlanMemo, key: str, name: str, home: Path, decision: Decision, engine: EngineApi | None) -> str | None:
    start = time.monotonic()
    if not isinstance(decision, FilesEdited):
        raise NotThisWay(decision.describe())
    doc, inputs, changed = decision.doc, decision.inputs, list(decision.edited)
    images = doc.images
    edits = [EditRecord.from_json(image.edit) for image in images]
    folders = [p for p in changed if os.path.isdir(p)]
    if folders:
        _same_listings(edits)
    files = [p for p in changed if p not in folders]
    from enginebuild.io.recipefiles import read_recipe_file, set_recipe_root

    root = json.loads(key)["root"]
    set_recipe_root(root)
    contents = {}
    for path in files:
        contents[path] = read_recipe_file(path, root)  # a file swapped for a symlink: refused, the full way decides
        if contents[path].startswith(ELF):  # every image's runtime closure is checked, and maybe its kernels
            raise NotThisWay(f"{path} is a binary: the full path checks what it loads")
    from enginebuild.io.store import Store
    from enginebuild.oci.engine import Engine
    from enginebuild.state.history import BuildHistory

    engine = engine or Engine()
    replay = Replay(Store(home), engine, contents)
    lines, fresh = [], []
    blobs = []
    for image, edit in zip(images, edits, strict=True):
        tags = list(image.tags)
        edit, image_id, written = replay.image(edit, tags)
        fresh.append(ImageRun(image.tags, image_id, edit.to_json()))
        blobs += edit.blobs()
        BuildHistory(home).record_nodes(edit.tag, [(n.name, n.chain, n.inputs) for n in edit.nodes])
        what = f"wrote {written} layer(s)" if written else "nothing to build"
        lines.append(f"{name} ({edit.platform}): {what} in {time.monotonic() - start:.1f}s "
                     f"(only files it copies changed) -> {tags[-1]}")
    memo.store(key, inputs, fresh, blobs)
    return "\n".join(lines)
