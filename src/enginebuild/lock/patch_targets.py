"""What each patch stack of an image applies to: the pinned source, or another version of it."""

from __future__ import annotations

from dataclasses import dataclass

from enginebuild.core.patchfile import PatchFile
from enginebuild.errors import FetchError, LockError, ResolveError, UserError, command
from enginebuild.io.proc import CommandFailed
from enginebuild.lock.lockfile import Lock, stale_inputs
from enginebuild.recipe.model import ImageSpec, PatchRef
from enginebuild.sources import Pinned, Source
from enginebuild.sources.base import Context
from enginebuild.sources.trees import SourceTree


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
        return self.tree.description if self.tree is not None else "(source not fetched here)"


def stacks(spec: ImageSpec) -> list[tuple[str, str, Source, tuple[PatchRef, ...]]]:
    """(owner, lock input, source, patches) of every stack of the image."""
    out = [(c.name, f"components.{c.name}.source", c.source, c.patches) for c in spec.components
           if c.patches and c.source]
    out += [(o.name, f"overlays.{o.name}.source", o.source, o.patches) for o in spec.overlays if o.patches]
    return out


def override_owners(spec: ImageSpec, component: str | None) -> set[str]:
    """The stacks `--engine` moves: every stack whose source is the same project as the one
    named by `--component`, or, without it, as the only project the image's stacks are on."""
    found = [(owner, source) for owner, _, source, _ in stacks(spec) if source.pinned_by_lock]
    if component:
        named = [source for owner, _, source, _ in stacks(spec) if owner == component]
        if not named:
            raise UserError(f"{spec.name} has no patch stack on {component!r} "
                            f"(stacks: {', '.join(o for o, *_ in stacks(spec)) or 'none'})")
        return {owner for owner, source in found if source.project() == named[0].project()} | {component}
    projects: dict[tuple[str, ...], list[str]] = {}
    for owner, source in found:
        projects.setdefault(source.project(), []).append(owner)
    if len(projects) > 1:
        groups = "; ".join(f"{', '.join(owners)} ({source_of(spec, owners[0])})" for owners in projects.values())
        raise UserError(f"--engine: {spec.name} has stacks on several sources ({groups}); name one of them with "
                        "--component (the stacks on the same source move with it)")
    return set(next(iter(projects.values()), []))


def source_of(spec: ImageSpec, owner: str) -> str:
    return next(source.describe() for o, _, source, _ in stacks(spec) if o == owner)


def stack_targets(ctx: Context, spec: ImageSpec, lock: Lock | None, *, engine_ref: str | None = None,
                  component: str | None = None) -> list[StackTarget]:
    found = stacks(spec)
    inputs = {name for _, name, _, _ in found}
    problems = [p for p in stale_inputs(spec, lock) if p[0] in inputs or p[0] == "lockfile"]
    moved = override_owners(spec, component) if engine_ref else set()
    if problems and not (engine_ref and all(p[0] in {f"{kind}.{owner}.source" for owner in moved
                                                     for kind in ("components", "overlays")} for p in problems)):
        detail = "; ".join(f"{n}: {why}" for n, why in problems)
        raise LockError(f"{spec.file}: the lock does not pin the sources the patches apply to ({detail})",
                        hint=f"run `{command()} lock {spec.name}`")
    targets = []
    for owner, name, source, patches in found:
        parsed = [p.patch for p in patches]
        if engine_ref and owner in moved:
            targets.append(StackTarget(spec.name, owner, parsed, source.override(engine_ref, ctx).tree(ctx),
                                       override=True))
            continue
        pinned = lock.source_pin(source, name) if lock is not None else Pinned(source, None)
        if not pinned.complete:
            why = lock.unresolved().get(name, "not resolved") if lock else "no lockfile"
            targets.append(StackTarget(spec.name, owner, parsed, None, unchecked=f"its source is not pinned here: {why}"))
            continue
        try:
            tree = pinned.tree(ctx).fetch()
        except (FetchError, ResolveError, CommandFailed) as exc:  # pinned, out of reach (no network, no mirror)
            targets.append(StackTarget(spec.name, owner, parsed, None,
                                       unchecked=f"its pinned source could not be fetched: {exc.message}"))
            continue
        targets.append(StackTarget(spec.name, owner, parsed, tree))
    return targets
