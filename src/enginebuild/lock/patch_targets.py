"""What each patch stack of an image applies to: the pinned source, or another version of it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from enginebuild.core.patchfile import PatchFile
from enginebuild.errors import LockError, UserError, command
from enginebuild.lock.lockfile import Lock, stale_inputs
from enginebuild.sources import Source
from enginebuild.sources.base import Context
from enginebuild.sources.trees import SourceTree
from enginebuild.spec.model import ImageSpec, PatchRef


@dataclass
class StackTarget:
    image: str
    owner: str  # the component or overlay the stack belongs to
    patches: list[PatchFile]
    tree: SourceTree | None  # None when the source is not pinned where this runs (see `unchecked`)
    override: bool = False
    unchecked: str = ""

    @property
    def description(self) -> str:
        return self.tree.description if self.tree is not None else "(source not pinned here)"


def stacks(spec: ImageSpec) -> list[tuple[str, str, Source, tuple[PatchRef, ...]]]:
    """(owner, lock input, source, patches) of every stack of the image."""
    out = [(c.name, f"components.{c.name}.source", c.source, c.patches) for c in spec.components
           if c.patches and c.source]
    out += [(o.name, f"overlays.{o.name}.source", o.source, o.patches) for o in spec.overlays if o.patches]
    return out


def override_owner(spec: ImageSpec, component: str | None) -> str | None:
    found = stacks(spec)
    if component:
        if component not in [owner for owner, *_ in found]:
            raise UserError(f"{spec.name} has no patch stack on {component!r} "
                            f"(stacks: {', '.join(o for o, *_ in found) or 'none'})")
        return component
    candidates = [owner for owner, _, source, _ in found if source.pinned_by_lock]
    if len(candidates) > 1:
        raise UserError(f"--engine: {spec.name} has several stacks ({', '.join(candidates)}); name one with "
                        "--component")
    return candidates[0] if candidates else None


def stack_targets(ctx: Context, spec: ImageSpec, lock: Lock | None, *, engine_ref: str | None = None,
                  component: str | None = None) -> list[StackTarget]:
    found = stacks(spec)
    inputs = {name for _, name, _, _ in found}
    problems = [p for p in stale_inputs(spec, lock) if p[0] in inputs or p[0] == "lockfile"]
    target_owner = override_owner(spec, component) if engine_ref else None
    if problems and not (engine_ref and all(p[0] == f"components.{target_owner}.source" or
                                            p[0] == f"overlays.{target_owner}.source" for p in problems)):
        detail = "; ".join(f"{n}: {why}" for n, why in problems)
        raise LockError(f"{spec.file}: the lock does not pin the sources the patches apply to ({detail})",
                        hint=f"run `{command()} lock {spec.name}`")
    targets = []
    for owner, name, source, patches in found:
        parsed = [p.patch for p in patches]
        impl = source.impl
        if engine_ref and owner == target_owner:
            pin = impl.override(source.request, engine_ref, ctx)
            request: Any = source.request
            if dataclasses.is_dataclass(request) and not isinstance(request, type) and hasattr(request, "ref"):
                request = dataclasses.replace(request, ref=engine_ref)
            elif dataclasses.is_dataclass(request) and not isinstance(request, type) and hasattr(request, "version"):
                request = dataclasses.replace(request, version=getattr(pin, "version", engine_ref))
            targets.append(StackTarget(spec.name, owner, parsed, impl.tree(request, pin, ctx), override=True))
            continue
        pin = lock.pin_by_name(name) if lock is not None and source.pinned_by_lock else None
        if source.pinned_by_lock and pin is None:
            why = lock.unresolved().get(name, "not resolved") if lock else "no lockfile"
            targets.append(StackTarget(spec.name, owner, parsed, None, unchecked=why))
            continue
        targets.append(StackTarget(spec.name, owner, parsed, impl.tree(source.request, pin, ctx)))
    return targets
