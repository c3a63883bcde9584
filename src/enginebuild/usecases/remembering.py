"""What a build leaves for the next one: the image tagged as asked, and what a later no-op or
file edit answers from (the memo of the run's inputs, state/memo.py, and each platform's
fast-edit record, fastedit.py). Gathered platform by platform, stored once the run is done."""

from __future__ import annotations

from dataclasses import dataclass, field

from enginebuild import fastedit
from enginebuild.execution.runstate import Outcome, local_tags
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.oci.engine import EngineApi, holds
from enginebuild.plan.image import Options
from enginebuild.plan.model import ImagePlan
from enginebuild.plan.render import TEMPLATES
from enginebuild.recipe.inputfiles import copied_paths, other_input_paths
from enginebuild.recipe.model import ImageSpec
from enginebuild.state.decision import decide
from enginebuild.state.memo import ImageRun, PlanMemo, RunOptions, tool_paths
from enginebuild.usecases.buildrequest import BuildRequest
from enginebuild.usecases.targets import parse_local_tag
from enginebuild.workspace import Workspace


def run_options(options: Options, platforms: tuple[str, ...]) -> RunOptions:
    """A plan's options as the memo knows them (state/memo.py), for `platforms` (() for the spec's)."""
    return RunOptions(tuple(sorted(options.build_args.items())), options.on, tuple(sorted(options.only)), platforms)


@dataclass
class RunMemory:
    """One `image` run's memory: its inputs as they were before the plan read them, and what each
    platform built left (its tags, its image ID, its fast-edit record)."""

    ws: Workspace
    name: str
    spec: ImageSpec
    asked: RunOptions
    inputs: dict[str, list[int] | None]
    only_copied: list[str]  # the inputs fastedit.py may remake (copied files no template reads)
    results: list[ImageRun] = field(default_factory=list)

    @classmethod
    def start(cls, ws: Workspace, name: str, options: Options, platforms: tuple[str, ...]) -> RunMemory:
        """Says why a memo this run could have answered from did not; snapshots the inputs."""
        spec = ws.spec(name)
        asked = run_options(options, platforms)
        if asked.answerable() and not ws.overrides:
            decision = decide(PlanMemo(ws.home), asked.key(ws.root, name), holds(ws.engine()))
            if decision.doc is not None:
                output().say(f"{name}: {decision.describe()}")
        copied, others = copied_paths(ws.root, spec), other_input_paths(ws.root, spec, TEMPLATES) + tool_paths()
        only_copied = sorted({str(p) for p in copied} - {str(p) for p in others})
        return cls(ws, name, spec, asked, PlanMemo.snapshot(copied + others), only_copied)

    def recorded(self, plan: ImagePlan, outcome: Outcome, request: BuildRequest, listed: tuple[str, ...]) -> list[str]:
        """The platform's image tagged as asked and, when loaded, what a later no-op or file edit
        answers from; its tags."""
        tags, remembered = _tag_as_asked(self.name, plan, outcome, request, listed, self.ws.engine())
        if request.load:
            edit = fastedit.record(Store(self.ws.home), self.spec, plan, outcome, self.only_copied)
            self.results.append(ImageRun(tuple(remembered), outcome.image_id, edit.to_json()))
        return tags

    def store(self, request: BuildRequest) -> None:
        """The memo of the run, when a later run with the same options can answer from it."""
        if self.asked.answerable() and not self.ws.overrides and request.load:
            PlanMemo(self.ws.home).store(self.asked.key(self.ws.root, self.name), self.inputs, self.results,
                                         [la[3] for r in self.results for la in r.edit["layers"] if la[3]])


def _tag_as_asked(name: str, plan: ImagePlan, outcome: Outcome, request: BuildRequest,
                  listed: tuple[str, ...], engine: EngineApi) -> tuple[list[str], list[str]]:
    """The image's tags (with -t's, which name the image the plain tag names) and those a later
    no-op or file edit checks and moves (never a -t of this run alone)."""
    tags = local_tags(plan, listed)
    if not request.local_tags or len(tags) < 2:
        return tags, tags
    named = [parse_local_tag(t.replace("{image}", name.replace(":", "-"))) for t in request.local_tags]
    for repository, tag in named:
        engine.tag(outcome.image_id, repository, tag)
    rest = [p for p in listed if p != plan.platform]
    output().say("  tagged " + ", ".join(f"{r}:{t}" for r, t in named)
                 + (f" (the {plan.platform} image only: an engine's tag names one image; the image's "
                    f"other platforms ({', '.join(rest)}) keep their {plan.tags[1]}-ARCH tags, and `push` "
                    "names every platform in one index)" if rest else ""))
    every = tags + [f"{r}:{t}" for r, t in named]
    return every, every if request.tags_follow else tags  # enginebuild.yaml's tags follow every build
