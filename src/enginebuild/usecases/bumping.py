"""Whether a release still needs a patch, by what it does: `patches check IMAGE --behaviour
[--engine V]`. The image (or, where it cannot be built here, an image of the catalogue that
extends it and can: `qwen36-dflash` through `qwen36-dflash-pypi`) is built at V without the
patches whose checks are asked, under tags of its own, and each check is run in it:

- `still needed`: upstream prints what the engine printed without the patch (`unpatched`);
- `obsolete`: upstream prints what the patched engine prints (`expect`);
- `changed`: neither, so a human must look (or the check states no unpatched output);
- `not run`: the check needs what this machine lacks (a GPU).

Beside each, the text's verdict (`patches check` at V: applies, already upstream, obsolete,
conflicts) and, where the two disagree, a line that says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from enginebuild.checks.behaviour import CheckRun, has_gpus, observed
from enginebuild.checks.imports import check_python
from enginebuild.errors import BuildFailed, UserError
from enginebuild.execution.sites import HOST_PLATFORM
from enginebuild.io.progress import output
from enginebuild.lock.patch_targets import override_owners, stack_targets, stacks
from enginebuild.patches.check import check_stack
from enginebuild.plan.image import plan_image
from enginebuild.recipe.model import ImageSpec
from enginebuild.recipe.patchchecks import PatchCheck, SlowPattern
from enginebuild.usecases.building import build_image
from enginebuild.usecases.buildrequest import BuildRequest, Built
from enginebuild.wire import JsonDoc
from enginebuild.workspace import Workspace

STILL_NEEDED, OBSOLETE, CHANGED, NOT_RUN = "still needed", "obsolete", "changed", "not run"
# what each text verdict of `patches check` says about the need for the patch
TEXT_MEANS = {"applies": STILL_NEEDED, "already-upstream": OBSOLETE, "obsolete": OBSOLETE, "conflicts": CHANGED}
VERSION_KEY = {"pypi": "version", "git": "ref"}  # where a source kind's spec says which version it is


@dataclass(frozen=True)
class CheckVerdict:
    check: PatchCheck
    verdict: str
    run: CheckRun
    text: str  # the patch's text verdict at the same engine

    @property
    def disagree(self) -> bool:
        return self.verdict != NOT_RUN and TEXT_MEANS.get(self.text) not in (None, self.verdict)

    def to_json(self) -> JsonDoc:
        return {"patch": self.check.patch, "check": self.check.name, "behaviour": self.verdict, "text": self.text,
                "output": self.run.output[:400], **({"why": self.run.why} if self.run.why else {}),
                "disagree": self.disagree}


@dataclass
class Bump:
    image: str
    through: str  # the image built (the one asked, or one that extends it)
    engine: str  # the version built ("the lock's pin" without --engine)
    platform: str
    removed: tuple[str, ...]  # the patches left out of that build
    verdicts: list[CheckVerdict] = field(default_factory=list)
    image_checks: str = ""  # the build's own checks (kernels, runtime closure) that failed at this engine

    @property
    def needed(self) -> bool:
        """Whether every check says the patch is still needed and every text that it applies."""
        return all(v.verdict == STILL_NEEDED and v.text == "applies" for v in self.verdicts)

    def to_json(self) -> JsonDoc:
        return {"image": self.image, "built": self.through, "engine": self.engine, "platform": self.platform,
                "without": list(self.removed), "checks": [v.to_json() for v in self.verdicts],
                **({"image_checks_failed": self.image_checks} if self.image_checks else {})}


def verdict_of(check: PatchCheck, run: CheckRun) -> str:
    if run.status == "not-run":
        return NOT_RUN
    if run.status == "failed":
        return CHANGED  # it did not even run as it does where the patch is
    try:
        if check.patched_by(run.output):
            return OBSOLETE
        return STILL_NEEDED if check.unpatched_by(run.output) else CHANGED
    except SlowPattern:
        return CHANGED  # no answer from its patterns: not evidence either way


def route(ws: Workspace, name: str, wanted: set[str]) -> ImageSpec:
    """The image to build: `name` itself when its lock lets it be built here, else the nearest image
    of the catalogue that extends it (the fewest steps of `extends` away, then by name), can be
    built here and carries every patch asked."""
    extending = [n for n in ws.catalog.names() if n != name and n not in ws.broken() and name in ws.spec(n).chain]
    candidates = [name] + sorted(extending, key=lambda n: (ws.spec(n).chain.index(name), n))
    for candidate in candidates:
        spec = ws.spec(candidate)
        lock = ws.lock(spec)
        carried = {p.name for _, _, _, patches in stacks(spec) for p in patches}
        if not spec.abstract and lock is not None and not lock.blocked() and wanted <= carried:
            return spec
    raise UserError(f"--behaviour: {name} cannot be built here, and no image of the catalogue that extends it can "
                    f"(tried {', '.join(candidates)})",
                    hint="lock one of them where its sources are reachable, or add an image that takes the engine "
                         "from a release (as qwen36-dflash-pypi does)")


def settings_for(ws: Workspace, spec: ImageSpec, engine_ref: str | None, component: str | None) -> tuple[
        tuple[str, ...], tuple[str, ...], str]:
    """The `--set` values that build `spec` without its checked patches (and at `engine_ref`):
    (settings, the patches left out, the engine version)."""
    owners = [(owner, source, patches) for owner, _, source, patches in stacks(spec) if any(p.checks for p in patches)]
    removed = tuple(dict.fromkeys(p.name for _, _, patches in owners for p in patches))
    values = [f"components.{owner}.patches=[]" if any(c.name == owner for c in spec.components) else
              f"overlays.{owner}.patches=[]" for owner, _, _ in owners]
    if engine_ref is None:
        return tuple(values), removed, "the lock's pin"
    ctx = ws.context()
    moved = override_owners(spec, component)
    version = ""
    for owner, _, source, _ in stacks(spec):
        if owner not in moved:
            continue
        if source.kind not in VERSION_KEY:
            raise UserError(f"--engine {engine_ref}: {owner}'s source ({source.describe()}) has no versions to move")
        pinned = source.override(engine_ref, ctx)
        version = pinned.version() or engine_ref
        values.append(f"components.{owner}.source.{source.kind}.{VERSION_KEY[source.kind]}={version}")
        project = source.project()
        for comp in spec.components:  # a component taken from the same project's release moves with it
            if comp.release is not None and ("pypi", comp.release.index, comp.release.name.lower()) == project:
                values.append(f"components.{comp.name}.release.version={version}")
    return tuple(values), removed, version


def bump(ws: Workspace, name: str, engine_ref: str | None, component: str | None,
         say: Callable[[str], None] | None = None) -> Bump:
    """Build `name` (or its route) without its checked patches at `engine_ref`, and judge each check."""
    asked = ws.spec(name)
    wanted = {p.name for _, _, _, patches in stacks(asked) for p in patches if p.checks}
    if not wanted:
        raise UserError(f"--behaviour: no patch of {name} has checks (patches/<component>/<name>.checks.yaml)",
                        hint="docs/patches.md says how to write one")
    spec = route(ws, name, wanted)
    values, removed, version = settings_for(ws, spec, engine_ref, component)
    platform = HOST_PLATFORM if HOST_PLATFORM in spec.platforms else spec.platforms[0]
    (say or output().say)(f"{name}: building {spec.name} ({platform}) at {version} without {', '.join(removed)}")
    moved = Workspace(ws.root, (*ws.overrides, *values), docker=ws.docker, registries=ws.registries)
    flavour = "unpatched" if engine_ref is None else \
        "unpatched-" + "".join(c if c.isalnum() or c in "._-" else "-" for c in version)[:100]
    options = dataclasses.replace(moved.plan_options(), flavour=flavour)  # tags of its own: the user's stay
    engine = moved.engine()
    failed = ""
    try:
        plan = build_image(moved, spec.name, BuildRequest(platform=[platform]), options,
                           lambda b: (say or output().say)(_built(b)))[-1]
    except BuildFailed as exc:  # the image's own checks (kernels at a new release, say): the image is there
        plan = plan_image(moved.spec(spec.name), moved.lock(moved.spec(spec.name)), platform, options)
        if engine.inspect(plan.tag) is None:
            raise
        failed = _first_failure(exc.message)
        (say or output().say)(f"{name}: {plan.tag} is built, but its own checks fail at {version} ({failed}); the "
                              "patches' checks run in it all the same")
    text = _text_verdicts(ws, spec, engine_ref, component)
    gpus = has_gpus(engine)
    python = check_python(plan)
    result = Bump(name, spec.name, version, platform, removed, image_checks=failed)
    for check in (c for _, _, _, patches in stacks(spec) for p in patches for c in p.checks):
        if any(v.check.patch == check.patch and v.check.name == check.name for v in result.verdicts):
            continue
        run = observed(engine, plan.tag, check, python, gpus)
        result.verdicts.append(CheckVerdict(check, verdict_of(check, run), run, text.get(check.patch, "?")))
    return result


def _built(built: Built) -> str:
    """A build's report, as `image` prints it."""
    return f"{built.name} ({built.platform}): {', '.join(built.done) or 'nothing to build'} in " \
           f"{built.seconds:.1f}s -> {built.result}"


def _first_failure(message: str) -> str:
    """A failed check's message in one line: what failed, and its first failing item."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    items = [line for line in lines[1:] if line.startswith(("MISSING", "FAILED"))]
    more = f" (and {len(items) - 1} more)" if len(items) > 1 else ""
    return (f"{lines[0].rstrip(':')}: {items[0]}{more}" if items else lines[0]) if lines else "its checks failed"


def _text_verdicts(ws: Workspace, spec: ImageSpec, engine_ref: str | None, component: str | None) -> dict[str, str]:
    """Each patch's `patches check` verdict at the same engine, by patch name."""
    out: dict[str, str] = {}
    for target in stack_targets(ws.context(), spec, ws.lock(spec), engine_ref=engine_ref, component=component):
        if target.tree is None:
            continue
        for result in check_stack(target.patches, target.tree).results:
            out.setdefault(result.name, result.status)
    return out
