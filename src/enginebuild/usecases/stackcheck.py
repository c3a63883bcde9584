"""Patch stacks applied first: before anything is built, each component's whole stack is applied
on the host to its source, as `patches check` applies it, so a patch that no longer applies stops
the build at once, naming patch, file and hunk."""

from __future__ import annotations

from enginebuild.layerkinds.context import FromSource
from enginebuild.patches.check import check_stack
from enginebuild.patches.patched import patched_tree, stack_failure
from enginebuild.plan.model import ImagePlan
from enginebuild.usecases.executors import checking_executor
from enginebuild.workspace import Workspace


def check_stacks_first(ws: Workspace, plan: ImagePlan) -> None:
    """Every stack of the plan's components applied (those applied as files too); the patched
    trees of components still to build made now, so a failure comes before any build."""

    executor = checking_executor(ws, ws.spec(plan.image))
    for comp in plan.components:
        if comp.file_patches and comp.tree is not None and isinstance(comp.tree.origin, FromSource):
            tree = comp.tree.origin.source.tree(ws.context(executor.http, plan.epoch))
            failure = check_stack([p.patch for p in comp.stack], tree).first_failure
            if failure is not None:
                raise stack_failure(comp.name, tree.description, failure, plan.image)
        if executor.output_record(comp) is not None:
            continue
        for item in comp.context:
            if isinstance(item.origin, FromSource) and item.origin.patches:
                o = item.origin
                patched_tree(ws.context(executor.http, plan.epoch), comp.name, o.source, o.patches,
                             item.digest, plan.image, o.only)
