"""`patches check`: each image's patch stacks checked against the exact source its lock pins (or
the release/ref --engine names, the lock untouched), without compiling. An image whose spec or
patch does not load is one error row beside the others when the whole catalogue is checked."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from enginebuild.errors import FetchError, ResolveError, UserError
from enginebuild.io.proc import CommandFailed
from enginebuild.lock.patch_targets import StackTarget, stack_targets
from enginebuild.patches.check import PatchResult, check_stack
from enginebuild.recipe.model import ImageSpec
from enginebuild.sources.base import Context
from enginebuild.workspace import Workspace


@dataclass(frozen=True)
class StackRow:
    target: StackTarget
    results: tuple[PatchResult, ...] | None  # None: not checked (target.unchecked says why)


@dataclass
class StackReport:
    rows: list[StackRow] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (image, why its spec or a patch does not load)
    failed: bool = False  # a patch does not apply as it should
    unchecked: bool = False  # a stack could not be checked here


def _moves_with_engine(spec: ImageSpec) -> bool:
    """Whether --engine moves anything of this image: a source the lock pins that patches apply to."""
    return any(o.source.pinned_by_lock for o in spec.overlays) or \
        any(c.source and c.source.pinned_by_lock and c.patches for c in spec.components)


def _targets(ws: Workspace, ctx: Context, spec: ImageSpec, engine: str | None,
             component: str | None) -> list[StackTarget]:
    try:
        return stack_targets(ctx, spec, ws.lock(spec), engine_ref=engine, component=component)
    except ResolveError as exc:
        if engine:
            raise UserError(f"--engine {engine}: {exc.message}", hint=exc.hint) from None
        raise


def _check(target: StackTarget, report: StackReport) -> None:
    if target.tree is None:
        report.unchecked = True
        report.rows.append(StackRow(target, None))
        return
    try:
        outcome = check_stack(target.patches, target.tree)
    except (FetchError, ResolveError, CommandFailed) as exc:  # its history, say, out of reach from here
        report.unchecked = True
        unreached = dataclasses.replace(target, tree=None,
                                        unchecked=f"its pinned source could not be fetched: {exc.message}")
        report.rows.append(StackRow(unreached, None))
        return
    report.failed |= not outcome.ok
    report.rows.append(StackRow(target, tuple(outcome.results)))


def check_stacks(ws: Workspace, images: list[str], engine: str | None, component: str | None) -> StackReport:
    """The images named (every one of the catalogue when none is): each stack's row, in order."""
    names = ws.select(images) if images else list(ws.catalog.names())
    ctx = ws.context()
    report = StackReport()
    for name in names:
        try:
            spec = ws.spec(name)
            if spec.abstract or (engine and not images and not _moves_with_engine(spec)):
                continue
            targets = _targets(ws, ctx, spec, engine, component)
        except UserError as exc:
            if images:
                raise
            report.errors.append((name, exc.message))
            continue
        for target in targets:
            _check(target, report)
    return report
