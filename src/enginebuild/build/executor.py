"""Walking a plan: fetch what the missing stages need, then build them in order.

A stage whose image exists is never rebuilt; when the final stage exists nothing is
fetched and no builder is started.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.builder import detect_builder, run_build
from enginebuild.context import write_context
from enginebuild.engine_api import EngineAPI
from enginebuild.fetch import Fetcher
from enginebuild.history import BuildHistory
from enginebuild.stages import STAGE_REPO, Plan


@dataclass
class Outcome:
    built: list = field(default_factory=list)
    existing: list = field(default_factory=list)
    pulled: list = field(default_factory=list)
    pushed: list = field(default_factory=list)
    builder_called: bool = False
    seconds: dict = field(default_factory=dict)


def stages_to_build(plan: Plan, existing_keys: set) -> list:
    """Stages after the last one whose image exists (earlier ones are not needed)."""
    last = -1
    for i, stage in enumerate(plan.stages):
        if stage.key in existing_keys:
            last = i
    return list(plan.stages[last + 1:])


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def write_stage_context(fetcher: Fetcher, stage, folder: Path) -> Path:
    fd, path = tempfile.mkstemp(dir=folder, prefix=f"context-{stage.short}-", suffix=".tar")
    with os.fdopen(fd, "wb") as handle:
        write_context(handle, stage.dockerfile, stage.context, fetcher.materialize)
    return Path(path)


def pull_from_cache(plan: Plan, existing: set, cache, engine: EngineAPI, outcome: "Outcome") -> None:
    """Pull the last stage the cache has (from the end back to the last local one)."""
    total = len(plan.stages)
    for index in range(total - 1, -1, -1):
        stage = plan.stages[index]
        if stage.key in existing:
            return
        if cache.has(stage.key):
            say(f"  [{index + 1}/{total}] {stage.name:<14} {stage.short}  pulling from {cache.name} ...")
            if cache.pull(stage.key, engine):
                existing.add(stage.key)
                outcome.pulled.append(stage.name)
                return


def execute(plan: Plan, fetcher: Fetcher, home: Path, *, engine: EngineAPI | None = None,
            builder_name: str | None = None, verbose: bool = False, preflight=None, cache=None) -> Outcome:
    """Build what is missing. `preflight(names of stages to build)` runs before anything is fetched or built."""
    engine = engine or EngineAPI()
    existing = engine.tags_of(STAGE_REPO)
    outcome = Outcome()
    if cache is not None and stages_to_build(plan, existing):
        pull_from_cache(plan, existing, cache, engine, outcome)
    todo = stages_to_build(plan, existing)
    if todo and preflight is not None:
        preflight([s.name for s in todo])
    todo_keys = {s.key for s in todo}
    for stage in plan.stages:
        if stage.key not in todo_keys:
            outcome.existing.append(stage.name)
    if todo:
        items = [item for stage in todo for item in stage.context]
        fetched: list = []
        fetcher.fetch(items, report=lambda what, cached: None if cached else fetched.append(what))
        if fetched:
            say(f"  fetched {len(fetched)} input(s) into the store: {', '.join(fetched[:3])}"
                + (f" and {len(fetched) - 3} more" if len(fetched) > 3 else ""))
        builder = detect_builder(builder_name)
        outcome.builder_called = True
        say(f"  builder: {builder.describe()}")
        history = BuildHistory(home)
        tmp = Path(home) / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        total = len(plan.stages)
        for stage in todo:
            index = plan.stages.index(stage) + 1
            say(f"  [{index}/{total}] {stage.name:<14} {stage.short}  building ...")
            context_file = write_stage_context(fetcher, stage, tmp)
            try:
                secrets = {ident: os.environ[ident] for ident in stage.secrets if os.environ.get(ident)}
                for ident in stage.secrets:
                    if ident not in secrets:
                        say(f"    note: secret {ident} is not set in the environment; the build sees no /run/secrets/{ident}")
                elapsed = run_build(
                    builder, context_file=context_file, tag=stage.tag, platform=plan.platform,
                    labels={"org.enginebuild.stage": stage.name, "org.enginebuild.key": stage.key},
                    secrets=secrets, log_path=Path(home) / "logs" / f"{plan.image}-{stage.name}-{stage.short}.log",
                    what=f"{plan.image}/{stage.name}", verbose=verbose)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    context_file.unlink()
            history.record(plan.image_tag, [stage])
            outcome.built.append(stage.name)
            outcome.seconds[stage.name] = elapsed
            say(f"  [{index}/{total}] {stage.name:<14} {stage.short}  built in {elapsed:.1f}s")
            if cache is not None and cache.push_enabled:
                pushed = cache.push(stage.key, engine)
                outcome.pushed.append(stage.name)
                say(f"  [{index}/{total}] {stage.name:<14} {stage.short}  pushed to {cache.name} "
                    f"({pushed['layers_pushed']} new layer(s), {pushed['bytes_pushed']} bytes)")
    ensure_image_tag(engine, plan)
    BuildHistory(home).record(plan.image_tag, plan.stages)
    return outcome


def ensure_image_tag(engine: EngineAPI, plan: Plan) -> None:
    repo, _, tag = plan.image_tag.rpartition(":")
    final = engine.inspect(plan.final.tag)
    current = engine.inspect(plan.image_tag)
    if final and (current is None or current.get("Id") != final.get("Id")):
        engine.tag(plan.final.tag, repo, tag)
