"""The patches' behaviour checks (recipe/patchchecks.py), run in containers of a built image: no
network, the image's own interpreter for `python:` checks, each within its time limit; a check
that `needs` a GPU runs only where the engine has the NVIDIA runtime, and is otherwise listed as
not run, with why, never as passed. An image's checks run side by side, one container each, as
many at a time as there are CPUs (each is mostly one Python process importing the engine);
`python:` checks that begin with the same imports share one container that imports them once
(checks/sharedimport.py), and any of them that does not pass there runs alone for its verdict.

A run in which every check that ran passed is recorded in the store under the image's ID and the
checks' definitions: the same image asked the same again (a rebuild that changed nothing,
`verify` after `image`) is answered from the record, which the output says; a changed check or
image runs them again. `observed` is the other use: what each check prints in an image built
without the patch (`patches check --behaviour`), judged by the caller.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from enginebuild.checks.imports import check_python
from enginebuild.checks.sharedimport import groups, run_shared
from enginebuild.checks.verdicts import Verdicts
from enginebuild.errors import printable
from enginebuild.io.background import Background, settled
from enginebuild.io.store import Store, sha256_bytes
from enginebuild.oci.engine import EngineApi, EngineError, PrintedTooMuch
from enginebuild.oci.output import describe_limit
from enginebuild.plan.model import ImagePlan
from enginebuild.recipe.model import ImageSpec
from enginebuild.recipe.patchchecks import PatchCheck, SlowPattern, normal
from enginebuild.wire import JsonDoc

SHOWN = 400  # characters of an output a message shows


@dataclass
class CheckRun:
    check: PatchCheck
    status: str  # passed | failed | not-run
    output: str = ""
    why: str = ""  # a failure's or a not-run's reason, in words

    def to_json(self) -> JsonDoc:
        return {"patch": self.check.patch, "check": self.check.name, "status": self.status,
                "command": self.check.shown(), "expected": self.check.wanted(), "output": self.output[:SHOWN],
                **({"why": self.why} if self.why else {})}


@dataclass
class Behaviour:
    image: str
    platform: str
    runs: list[CheckRun] = field(default_factory=list)
    seconds: float = 0.0
    recorded: str = ""  # the image ID whose earlier run answered this one

    @property
    def ok(self) -> bool:
        return not any(r.status == "failed" for r in self.runs)

    def said(self) -> list[str]:
        """What a build says of it when it passed: the checks not run, then the verdict."""
        return [line.strip() for line in self.lines()]

    def of(self, status: str) -> list[CheckRun]:
        return [r for r in self.runs if r.status == status]

    def to_json(self) -> JsonDoc:
        return {"image": self.image, "platform": self.platform, "ok": self.ok, "seconds": round(self.seconds, 2),
                "recorded": bool(self.recorded), "checks": [r.to_json() for r in self.runs]}

    def lines(self) -> list[str]:
        out = []
        for run in self.of("not-run"):
            out.append(f"  NOT RUN {run.check.patch}: {run.check.name}: {run.why}")
        for run in self.of("failed"):
            out.append(f"  FAILED {run.check.patch}: {run.check.name}: `{run.check.shown()}` {run.why}")
        passed, ran = len(self.of("passed")), len(self.of("passed")) + len(self.of("failed"))
        verdict = "ok" if self.ok else "FAILED"
        where = f" (recorded when image {self.recorded[:19]} was checked)" if self.recorded else ""
        out.append(f"{self.image} ({self.platform}): patch checks {verdict}: {passed} of {ran} passed"
                   + (f", {len(self.of('not-run'))} not run" if self.of("not-run") else "")
                   + f"{where} in {self.seconds:.1f}s")
        return out


def image_checks(spec: ImageSpec, plan: ImagePlan) -> list[PatchCheck]:
    """The checks of every patch the image is built with (the components it builds, its overlays),
    each once however many stacks carry its patch."""
    built = {c.name for c in plan.components}
    refs = [p for c in spec.components if c.name in built for p in c.patches]
    refs += [p for o in spec.overlays for p in o.patches]
    found: dict[tuple[str, str], PatchCheck] = {}
    for ref in refs:
        for check in ref.checks:
            found.setdefault((check.patch, check.name), check)
    return list(found.values())


def has_gpus(engine: EngineApi) -> bool:
    """Whether containers of this engine can be given GPUs (the NVIDIA runtime is installed)."""
    return "nvidia" in (engine.info().get("Runtimes") or {})


def run_checks(engine: EngineApi, tag: str, plan: ImagePlan, checks: list[PatchCheck], store: Store | None,
               gpus: bool | None = None) -> Behaviour:
    """Every check in a container of the image `tag`; answered from the store's record of an
    earlier run of the same checks on the same image when there is one."""
    start = time.monotonic()
    result = Behaviour(plan.image, plan.platform)
    if not checks:
        return result
    gpus = has_gpus(engine) if gpus is None else gpus
    image_id = engine.image_id(tag) if store is not None else None
    key = sha256_bytes(json.dumps([image_id, gpus, [c.definition() for c in checks]], sort_keys=True).encode())
    kept = Verdicts(store).kept("behaviour", key) if store is not None and image_id else None
    if kept is not None:
        outputs = dict(kept.found["outputs"])
        for check in checks:
            said = outputs.get(f"{check.patch}:{check.name}")
            result.runs.append(CheckRun(check, "passed", str(said)) if said is not None else _not_run(check))
        result.seconds, result.recorded = kept.seconds, str(image_id)
        return result
    python = check_python(plan)
    # side by side, a container each (a check is mostly one Python process importing the engine),
    # or one container for the checks that begin with the same imports (checks/sharedimport.py)
    pool = Background(min(len(checks), os.cpu_count() or 1), "enginebuild-patch-checks")
    try:
        at = {id(check): i for i, check in enumerate(checks)}
        shared = [([at[id(c)] for c in group], pool.submit(functools.partial(
            shared_passes, engine, tag, group, python, gpus)))
            for group in groups(checks) if gpus or "gpu" not in group[0].needs]
        alone = {i: pool.submit(functools.partial(run_one, engine, tag, check, python, gpus))
                 for i, check in enumerate(checks) if all(i not in places for places, _ in shared)}
        runs: dict[int, CheckRun] = {}
        for places, future in shared:
            runs.update((places[i], run) for i, run in settled(future).items())
        alone.update({i: pool.submit(functools.partial(run_one, engine, tag, checks[i], python, gpus))
                      for places, _ in shared for i in places if i not in runs})
        result.runs.extend(runs[i] if i in runs else settled(alone[i]) for i in range(len(checks)))
    finally:
        pool.cancel()
    result.seconds = time.monotonic() - start
    passed = result.of("passed")
    if store is not None and image_id and result.ok and passed:
        Verdicts(store).keep("behaviour", key, {"outputs": {f"{r.check.patch}:{r.check.name}": r.output for r in passed}},
                             result.seconds, image_id)
    return result


def _not_run(check: PatchCheck) -> CheckRun:
    return CheckRun(check, "not-run", why="needs a GPU: this engine has no NVIDIA runtime to give it one")


def observed(engine: EngineApi, tag: str, check: PatchCheck, python: Sequence[str], gpus: bool) -> CheckRun:
    """What the check prints in the image `tag` (its status says only whether it could run)."""
    if "gpu" in check.needs and not gpus:
        return _not_run(check)
    try:
        status, out, err = engine.run_limited(tag, check.argv(python), dict(check.env), check.timeout_s,
                                              gpus="gpu" in check.needs)
    except PrintedTooMuch:
        return CheckRun(check, "failed", "", f"printed more than {describe_limit()} and was stopped")
    except EngineError as exc:  # the image cannot run it (no shell for a `run:` check, no such program)
        reason = printable(exc.message.splitlines()[0])[-SHOWN:]
        return CheckRun(check, "failed", "", f"its container could not start: {reason}")
    text = out.decode("utf-8", "replace")
    if status is None:
        return CheckRun(check, "failed", text, f"ran past its limit of {check.timeout_s:.0f}s and was stopped")
    if status != 0:
        tail = printable(normal(err.decode("utf-8", "replace")).splitlines()[-1][:SHOWN]) if err.strip() else ""
        return CheckRun(check, "failed", text, f"exited {status}" + (f": {tail}" if tail else ""))
    return CheckRun(check, "passed", text)


def run_one(engine: EngineApi, tag: str, check: PatchCheck, python: Sequence[str], gpus: bool) -> CheckRun:
    run = observed(engine, tag, check, python, gpus)
    try:
        if run.status != "passed" or check.patched_by(run.output):
            return run
    except SlowPattern as exc:
        return CheckRun(check, "failed", run.output, str(exc))
    wanted = _shown(check.expect) if check.expect is not None else check.wanted()
    return CheckRun(check, "failed", run.output, f"printed {_shown(run.output)}, expected {wanted}")


def shared_passes(engine: EngineApi, tag: str, group: list[PatchCheck], python: Sequence[str],
                  gpus: bool) -> dict[int, CheckRun]:
    """The checks of `group` (by index) that passed in one shared run; the others run alone."""
    passed = {}
    for index, did in run_shared(engine, tag, group, python, gpus).items():
        check = group[index]
        if did.status != 0 or did.big:
            continue
        output = did.out.decode("utf-8", "replace")
        try:
            if check.patched_by(output):
                passed[index] = CheckRun(check, "passed", output)
        except SlowPattern:
            continue
    return passed


def _shown(text: str) -> str:
    value = normal(text)
    return repr(value[:SHOWN] + ("..." if len(value) > SHOWN else ""))
