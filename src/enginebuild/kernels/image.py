"""Verify a built image's kernel architectures: the CUDA binaries of the layers enginebuild
made for it (component outputs, wheels, overlays, steps, files; not the base's layers or
system packages) against the image's `cuda-archs` (a component's own list for its outputs).

Read on the host from the stored layers: no GPU, no emulation, no container.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from enginebuild.errors import BuildFailed, UserError, command
from enginebuild.io.store import Store
from enginebuild.kernels.archs import parse_declared
from enginebuild.kernels.cuobjdump import Cuobjdump
from enginebuild.kernels.scan import FileReport, Rules, Skip, scan_layers
from enginebuild.lock.lockfile import Lock
from enginebuild.plan.model import ImagePlan, LayerNode
from enginebuild.plan.stored import layer_blobs
from enginebuild.recipe.model import ImageSpec
from enginebuild.wire import JsonDoc


@dataclass
class Verdict:
    image: str
    platform: str
    declared: list[str]
    files: list[FileReport] = field(default_factory=list)
    layers: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.files) and all(f.ok for f in self.files)

    def said(self) -> list[str]:
        """What a build says of it when it passed."""
        return self.lines()[-1:]

    def to_json(self) -> JsonDoc:
        return {"image": self.image, "platform": self.platform, "declared": self.declared, "ok": self.ok,
                "layers": self.layers, "seconds": round(self.seconds, 2), "files": [f.to_json() for f in self.files]}

    def lines(self) -> list[str]:
        head = (f"{self.image} ({self.platform}): cuda-archs {', '.join(self.declared)}; "
                f"{len(self.files)} CUDA binar{'y' if len(self.files) == 1 else 'ies'} in {self.layers} layer(s)")
        out = [head]
        out += [f"  {'ok     ' if f.ok else 'MISSING'} {f.describe()}" for f in self.files]
        if not self.files:
            out.append("  no CUDA binary found: an image that declares cuda-archs must carry its kernels")
        out.append(f"{self.image} ({self.platform}): {'ok' if self.ok else 'FAILED'} in {self.seconds:.1f}s")
        return out


def declared_of(spec: ImageSpec) -> list[str]:
    archs = list(spec.cuda_archs)
    for comp in spec.components:
        archs += [a for a in comp.cuda_archs if a not in archs]
    return archs


def rules_for(spec: ImageSpec, plan: ImagePlan, node: LayerNode, judged: tuple[str, ...] = ()) -> Rules | None:
    """The rules for a layer's files: the component's own cuda-archs for what it built; `judged`
    (verify --archs): these for every file instead."""
    archs: tuple[str, ...] = spec.cuda_archs
    made_by = node.payload.made_by()
    owner = next((c.name for c in plan.components if c.key == made_by), "") if made_by else ""
    if owner:
        comp = next((c for c in spec.components if c.name == owner), None)
        if comp is not None and comp.cuda_archs:
            archs = comp.cuda_archs
    archs = judged or archs
    if not archs:
        return None
    verify = spec.cuda_verify
    return Rules([parse_declared(a) for a in archs], jit=verify.jit,
                 skip=tuple(Skip(s.path, s.why) for s in verify.skip), driver=verify.driver)


def tool_of(lock: Lock, store: Store) -> Cuobjdump:
    pin = lock.tool("cuobjdump")
    if pin is None:
        raise UserError(f"lockfiles/{lock.image.replace(':', '--')}.lock pins no cuobjdump (tools.cuobjdump)",
                        hint=f"run `{command()} lock`")
    return Cuobjdump.from_pin(pin, store)


def verify_plan(spec: ImageSpec, lock: Lock | None, plan: ImagePlan, store: Store,
                judged: tuple[str, ...] = ()) -> Verdict:
    """`judged`: architectures to hold the built image to instead of those it declares (what a
    GB10 needs of an image built for 12.0), its plan and keys the spec's own."""
    declared = list(judged) or declared_of(spec)
    if not declared:
        raise UserError(f"{spec.file}: {spec.name} declares no cuda-archs: nothing to verify",
                        hint="list the kernel architectures its binaries must carry, such as cuda-archs: [12.1a]")
    if lock is None:
        raise UserError(f"{spec.file}: {spec.name} has no lockfile", hint=f"run `{command()} lock {spec.name}`")
    start = time.monotonic()
    tool = tool_of(lock, store)
    layers = []
    for node in plan.runtime.layers:
        if not node.payload.engine_files():
            continue
        rules = rules_for(spec, plan, node, judged)
        if rules is None:
            continue
        blobs = layer_blobs(store, node)
        if blobs is None:
            raise BuildFailed(f"{spec.name} ({plan.platform}) is not built at its current inputs ({node.name})",
                              hint=f"run `{command()} image {spec.name}` first")
        for sha, _ in blobs:
            if not store.intact(sha, node.name):  # re-hashed only when its stat moved since it was last
                raise BuildFailed(f"{spec.name} ({plan.platform}): a stored layer of {node.name} is damaged",
                                  hint=f"run `{command()} image {spec.name}`: it is made again")
            layers.append((node.name, store.path(sha), rules))
    verdict = Verdict(spec.name, plan.platform, declared, scan_layers(layers, tool, store), len(layers))
    verdict.seconds = time.monotonic() - start
    return verdict
