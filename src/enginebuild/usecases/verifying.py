"""Verifying built images against what they claim, the use case behind `verify`: the runtime
closure, the kernel architectures every CUDA binary carries, the imports and the patches'
behaviour checks in the image, the files of patches applied as files, how `serve` spreads it and
what its bytecode adds. The verb parses arguments and prints; this plans each image and platform
and checks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from enginebuild.checks.behaviour import Behaviour, CheckRun, image_checks
from enginebuild.checks.behaviour import run_checks as run_patch_checks
from enginebuild.checks.imports import Imports, check_imports
from enginebuild.checks.patchedcheck import PatchedCheck, check_patched
from enginebuild.errors import command
from enginebuild.io.store import Store
from enginebuild.kernels.image import declared_of, verify_plan
from enginebuild.kernels.runtime import check_plan
from enginebuild.plan.envs import Pins
from enginebuild.plan.image import plan_image
from enginebuild.plan.stored import layer_blobs
from enginebuild.registrycache import substitutes
from enginebuild.usecases.targets import platforms_of
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.kernels.closure import Closure
    from enginebuild.kernels.image import Verdict
    from enginebuild.lock.lockfile import Lock
    from enginebuild.plan.model import ImagePlan
    from enginebuild.recipe.model import ImageSpec


@dataclass(frozen=True)
class Verified:
    """One platform of an image, verified: its runtime closure, its kernels' verdict (None for an
    image that declares no cuda-archs: nothing asked of its kernels, not a failure), its imports
    (None unless the spec asks: `runtime-check.imports`), its patches' behaviour checks (None
    when no patch it is built with has any)."""

    closure: Closure
    verdict: Verdict | None
    imports: Imports | None
    behaviour: Behaviour | None
    patched: PatchedCheck | None = None  # the files of patches applied as files (None: it has none)
    serving: str | None = None  # how `serve` spreads it over nodes (vLLM images: whether Ray is in the closure)
    bytecode: str | None = None  # what its bytecode layers add (None: no Python to compile)


def serving_line(spec: ImageSpec, lock: Lock | None, platform: str) -> str | None:
    """For an image whose Python closure has vLLM: the multi-node executor `serve` uses, and whether
    Ray is there for --backend ray."""
    python = spec.runtime.python
    if lock is None or not python or not python.requirements:
        return None
    found = {p.name: p.version for p in Pins(spec, lock).python(f"runtime.python@{platform}").packages}
    if "vllm" not in found:
        return None
    ray = f"Ray {found['ray']} in the closure: `serve --backend ray` can use it" if "ray" in found else \
        "Ray is not in the closure: `serve --backend ray` is refused"
    version = f" {found['vllm']}" if found["vllm"] else ""
    return f"serve: {spec.name} ({platform}): vLLM{version} across nodes with its native multi-node executor; {ray}"


def verify_images(ws: Workspace, names: list[str], platforms: list[str],
                  judged: tuple[str, ...] = ()) -> Iterator[Verified]:
    """Each image and platform asked, as it finishes (see `Verified`)."""

    def save(ref: str) -> AbstractContextManager[IO[bytes]]:
        return ws.engine().save(ref)

    for name in dict.fromkeys(names):
        spec = ws.spec(name)
        lock = ws.lock(spec)
        for platform in platforms_of(spec, platforms):
            plan = plan_image(spec, lock, platform, ws.plan_options())
            substitutes.realize_all(Store(ws.home), plan.runtime.layers)  # stood-in layers' bytes, to read
            closure = check_plan(spec, plan, Store(ws.home), save)
            verdict = verify_plan(spec, lock, plan, Store(ws.home), judged) if declared_of(spec) or judged else None
            imports = None
            engine = ws.engine()
            checks = image_checks(spec, plan)
            asked = spec.runtime_check.imports is not None or bool(checks)  # else the engine is not asked
            loaded = asked and engine.inspect(plan.tag) is not None  # not when built with --no-load, or removed
            load_it = f"the engine has no {plan.tag} to run it in: `{command()} image {spec.name} --platform " \
                      f"{plan.platform}` loads it"
            if spec.runtime_check.imports is not None:
                imports = Imports(spec.name, plan.platform, failed=[("(not run)", load_it)]) if not loaded else \
                    check_imports(engine, plan.tag, plan, spec.runtime_check.imports, Store(ws.home))
            behaviour = None
            if checks and loaded:
                behaviour = run_patch_checks(engine, plan.tag, plan, checks, Store(ws.home))
            elif checks:
                behaviour = Behaviour(spec.name, plan.platform, [CheckRun(c, "not-run", why=load_it) for c in checks])
            patched = check_patched(plan, Store(ws.home), ws.context(mtime=plan.epoch))
            yield Verified(closure, verdict, imports, behaviour, patched, serving_line(spec, lock, plan.platform),
                           bytecode_line(spec, plan, Store(ws.home)))


def bytecode_line(spec: ImageSpec, plan: ImagePlan, store: Store) -> str | None:
    """What the image's bytecode layers add to its own layers, as built here."""

    node = next((n for n in plan.runtime.layers if n.payload.compiler()), None)
    if node is None:
        return f"{spec.name} ({plan.platform}): bytecode: none shipped (`bytecode: false`)" if not spec.bytecode \
            else None
    sizes = {n.name: sum(size for _, size in layer_blobs(store, n) or []) for n in plan.runtime.layers}
    blobs = layer_blobs(store, node) or []
    added, total = sizes[node.name], sum(sizes.values())
    return (f"{spec.name} ({plan.platform}): bytecode: {len(blobs)} layer(s), {added / 1e6:.1f} MB of the image's own "
            f"{total / 1e6:.1f} MB ({100 * added / max(total, 1):.1f} %), compiled by {node.payload.compiler()}")
