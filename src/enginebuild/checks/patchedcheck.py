"""`verify`: what patches applied as files change is, in the image, what their stack makes of
the source. For each such layer, each file it writes is read from the image's layers as the
engine stacks them (the topmost layer that has it, or deletes it, wins) and compared with the
component's whole stack applied to its source, as `patches check` applies it: a later layer that
overwrites or deletes a patched file, or a layer that is not what the patches make, is named."""

from __future__ import annotations

import hashlib
import posixpath
import tarfile
from dataclasses import dataclass, field

from enginebuild.io.store import Store
from enginebuild.io.tarrules import clean_name
from enginebuild.layerkinds.context import FromSource
from enginebuild.layerkinds.verbatim import read_facts
from enginebuild.patches.check import check_stack
from enginebuild.plan.model import ImagePlan, LayerNode
from enginebuild.plan.stored import layer_blobs
from enginebuild.sources.base import Context
from enginebuild.wire import JsonDoc


@dataclass
class PatchedCheck:
    image: str
    platform: str
    files: list[tuple[str, str, str]] = field(default_factory=list)  # (component, image path, "" or the problem)

    @property
    def ok(self) -> bool:
        return not any(problem for _, _, problem in self.files)

    def to_json(self) -> JsonDoc:
        return {"image": self.image, "platform": self.platform, "ok": self.ok,
                "files": [{"component": c, "path": "/" + p, "problem": why or None} for c, p, why in self.files]}

    def lines(self) -> list[str]:
        out = [f"  FAILED /{path} ({component}): {why}" for component, path, why in self.files if why]
        good = sum(1 for *_, why in self.files if not why)
        verdict = "ok" if self.ok else "FAILED"
        out.append(f"{self.image} ({self.platform}): patches applied as files: {good} of {len(self.files)} file(s) "
                   f"as the patch stack makes them: {verdict}")
        return out


def check_patched(plan: ImagePlan, store: Store, ctx: Context) -> PatchedCheck | None:
    """None when no patch of the image is applied as files."""
    layers = list(plan.runtime.layers)
    found = [(i, files) for i, node in enumerate(layers) if (files := node.payload.patched_files()) is not None]
    if not found:
        return None
    result = PatchedCheck(plan.image, plan.platform)
    for index, payload in found:
        comp = plan.component(payload.component)
        facts = read_facts(store, payload.component_key) or {}
        assert comp.tree is not None and isinstance(comp.tree.origin, FromSource)
        tree = comp.tree.origin.source.tree(ctx)
        outcome = check_stack([p.patch for p in comp.stack], tree)
        wanted: dict[str, bytes | None] = {}
        for path in payload.paths:
            for placed in facts.get(path, ()):
                wanted[payload.image_path(placed)] = outcome.files.get(path)
            if not facts.get(path):
                result.files.append((payload.component, path, "its placement in the outputs is not known here "
                                                               "(the layer was not written by this store)"))
        held = topmost(store, layers[index:], set(wanted))
        for image_path, expected in sorted(wanted.items()):
            digest, where = held.get(image_path, (None, "no layer"))
            if expected is None:
                problem = "the patch stack does not apply to the source"
            elif digest is None:
                problem = f"absent from the image ({where})"
            elif digest != hashlib.sha256(expected).hexdigest():
                problem = f"layer {where} holds other bytes than the patch stack makes"
            else:
                problem = ""
            result.files.append((payload.component, image_path, problem))
    return result


def topmost(store: Store, layers: list[LayerNode], paths: set[str]) -> dict[str, tuple[str | None, str]]:
    """path -> (sha256 of its bytes, or None where deleted; the layer's name), as the topmost of
    `layers` (bottom first) that has or deletes it leaves it."""
    out: dict[str, tuple[str | None, str]] = {}
    for node in reversed(layers):
        todo = paths - set(out)
        if not todo:
            break
        for sha, _ in reversed(layer_blobs(store, node) or []):
            with tarfile.open(store.verified(sha, node.name), "r:") as tar:
                for member in tar:
                    name = clean_name(member.name)
                    folder, base = posixpath.split(name)
                    gone = posixpath.join(folder, base[len(".wh."):]) if base.startswith(".wh.") else None
                    if gone in todo and gone not in out:
                        out[gone] = (None, f"{node.name} (deleted)")
                    elif name in todo and name not in out:
                        handle = tar.extractfile(member) if member.isreg() else None
                        out[name] = (hashlib.sha256(handle.read()).hexdigest() if handle else None, node.name)
    return out
