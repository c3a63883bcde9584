"""Learning the routes before the build: which files a component's build installs verbatim.

The plan routes a patch that only changes files by what the checkout's routes files say
(lockfiles/<lock>.routes.json, lock/routesfile.py); a file they do not know yet is routed as
files. Before an image is built, every component with patches applied as files is checked
here: the facts its layer of patched files will stand on are learned from the bytes of the
component's build without those patches (the build the plan makes anyway: it is built first,
or taken from the store or the registry cache), kept in the store with where each file is
installed, and written to the routes file where it does not already say them. A file the routes
file knows needs no bytes here (its layer's writer learns where it is installed, as it writes: a
fresh CI runner takes the component from the registry cache only if that layer needs it); a
file this machine's store found otherwise than the routes file says (a writer that met other
bytes, NotVerbatim) is written there too. A file found not verbatim puts its patch into the
build: the image is then planned again from the files, and that plan is the one built. So the
plan is always a function of the checkout, and the writer of the layer never has to route
anything. Under --locked/--frozen the routes file is an input like the lock: a build that would
change it stops, naming the component and files, before anything is built on the change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from enginebuild.errors import LockWouldChange, command
from enginebuild.execution.executor import Executor
from enginebuild.execution.secretscan import Scanner
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.layerkinds.verbatim import read_facts
from enginebuild.lock import routesfile
from enginebuild.plan.image import Options, plan_image
from enginebuild.registrycache.cache import cache_from_settings
from enginebuild.usecases.targets import builders_of, platforms_of

if TYPE_CHECKING:
    from enginebuild.layerkinds.base import FilesOfPatches
    from enginebuild.lock.lockfile import Lock
    from enginebuild.plan.model import ImagePlan
    from enginebuild.plan.routes import FactsReader
    from enginebuild.recipe.model import ImageSpec
    from enginebuild.workspace import Workspace


def patched_files(plan: ImagePlan) -> list[FilesOfPatches]:
    """The layers of patched files of a plan, one per component with patches applied as files."""
    return [files for layer in plan.runtime.layers if (files := layer.payload.patched_files()) is not None]


def lacking(each: FilesOfPatches, said: FactsReader, store: Store) -> list[str]:
    """What neither the routes file nor this machine's store knows: only those need bytes (a
    known file's placement is learned by the layer's writer, as it writes)."""
    known, stored = said(each.component_key) or {}, read_facts(store, each.component_key) or {}
    return [p for p in each.paths if p not in known and p not in stored]


def learn_routes(ws: Workspace, spec: ImageSpec, lock: Lock | None, plan: ImagePlan, options: Options,
                 executor: Executor, locked: bool = False) -> tuple[ImagePlan, Options]:
    """The plan to build, once every file a patch applied as files changes is known, and the
    options that made it (their facts read from the routes files as they are now); `locked`
    (--locked/--frozen): a routes file that would change is refused, naming what it lacks."""
    store = Store(ws.home)
    for _ in range(1 + sum(len(c.file_patches) for c in plan.components)):  # each round moves a patch or ends
        moved = False
        layers = patched_files(plan)
        said = options.facts(spec.lock_name)
        unknown = [each for each in layers if lacking(each, said, store)]
        if unknown:  # built (or taken from the store or the registry cache) as the plan builds it anyway
            executor.components(plan, frozenset(each.component for each in unknown))
        for each in layers:
            facts: Mapping[str, tuple[object, ...]] = read_facts(store, each.component_key) or {}
            missing = lacking(each, said, store)
            if missing:
                record = executor.output_record(plan.component(each.component))
                assert record is not None, f"component {each.component} was just built"
                facts = each.learn(store, plan.image, record, facts, missing, ws.mirrors)
            before = said(each.component_key) or {}
            if all(p in before and (p not in facts or bool(facts[p]) == before[p]) for p in each.paths):
                continue  # the file says it all, and this machine's bytes never said otherwise
            verbatim = {path: bool(facts[path]) if path in facts else before[path] for path in each.paths}
            if locked:
                refuse_change(spec, each.component, plan.platform, before, verbatim)
            routesfile.record(ws.root, spec.lock_name,
                              routesfile.Recipe(each.component, plan.platform, each.component_key, verbatim))
            moved = moved or not all(verbatim.values())
            where = f"lockfiles/{spec.lock_name}.routes.json"
            for path, value in sorted(verbatim.items()):
                if before.get(path) == value:
                    continue
                if value:
                    output().say(f"  {each.component}: {path} is installed verbatim by its build: written to {where}")
                else:
                    was = " (it said verbatim)" if before.get(path) else ""
                    output().say(f"  {each.component}: {path} is not installed verbatim by its build{was}: "
                                 f"written to {where}; its patch goes into the component's build")
        options = dataclasses.replace(options, facts=routesfile.committed(ws.root))
        if not moved:  # a file now known verbatim keeps its patch's route (and every key)
            return plan, options
        plan = plan_image(spec, lock, plan.platform, options)
    return plan, options



def refuse_change(spec: ImageSpec, component: str, platform: str, before: Mapping[str, bool],
                  verbatim: Mapping[str, bool]) -> None:
    """--locked/--frozen: the routes file says other than the build found (or does not say)."""
    where = f"lockfiles/{spec.lock_name}.routes.json"
    said = [f"{path}: {'not known' if path not in before else 'said ' + str(before[path]).lower()}, "
            f"found {str(value).lower()}" for path, value in sorted(verbatim.items()) if before.get(path) != value]
    raise LockWouldChange(f"{where}: component {component} ({platform}): the routes file would change: "
                          + "; ".join(said),
                          hint=f"run `{command()} lock {spec.name} --routes` and commit {where}, "
                               "or build without --locked/--frozen")


def learn_image(ws: Workspace, name: str, platforms: list[str]) -> list[str]:
    """`lock --routes`: what an image's routes file lacks, learned for each platform asked (the
    components its patches applied as files stand on built, or taken from the store or the
    registry cache; no image is made); the platforms whose plan changed by it."""

    spec = ws.spec(name)
    lock = ws.lock(spec)
    options = ws.plan_options()
    cache = cache_from_settings(ws.root, None, False, False)
    moved = []
    for platform in platforms_of(spec, platforms):
        plan = plan_image(spec, lock, platform, options)
        if not patched_files(plan):
            continue
        executor = Executor(ws.home, mirrors=ws.mirrors, cache=cache, scanner=Scanner(spec, store=Store(ws.home)),
                            builders=builders_of(ws, []), engine=ws.engine())
        learnt, options = learn_routes(ws, spec, lock, plan, options, executor)
        if learnt is not plan:
            moved.append(platform)
    return moved
