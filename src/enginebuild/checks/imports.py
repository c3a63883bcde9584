"""Import the top-level modules of the Python distributions enginebuild installed, in a container
of the built image (no network), with the environment the spec gives (`runtime-check.imports`).

The modules are those a distribution declares (`top_level.txt`) or, without it, the first
names of its RECORD; each is imported in turn in one interpreter, reporting the last line of
a failure's traceback. A module that kills the interpreter (a crash in a native library) is
reported by its exit status and the rest are imported in a new one.

A check that passed is recorded in the store under the image's ID and the check's definition
(interpreter, folders, environment, skips, this script): the same image asked the same again
(`verify` after `image`) is answered from the record, which the output says; any change to the
image or the check runs it again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from enginebuild.checks.verdicts import Verdicts
from enginebuild.io.store import Store, sha256_bytes
from enginebuild.oci.engine import EngineApi
from enginebuild.plan.model import ImagePlan, LayerNode
from enginebuild.recipe.model import ImportCheck
from enginebuild.wire import JsonDoc, loads

SCRIPT = r"""
import importlib, importlib.metadata as md, json, os, sys, traceback
roots, skip, done = (json.loads(a) for a in sys.argv[1:4])
def tops(dist):
    names = (dist.read_text("top_level.txt") or "").split()
    for f in ([] if names else dist.files or ()):
        first = f.parts[0] if f.parts else ""
        if first.endswith((".dist-info", ".data", ".pth")) or first in ("..", "__pycache__"):
            continue
        if len(f.parts) == 1:
            if not first.endswith((".py", ".so")):
                continue
            first = first.split(".")[0]
        names.append(first)
    return [n for n in dict.fromkeys(names) if n.isidentifier()]
found = {}
for dist in md.distributions(path=roots):
    for name in tops(dist):
        found.setdefault(name, dist.metadata["Name"])
print(json.dumps({"modules": found}), flush=True)
for name in sorted(found):
    if name in skip or name in done:
        continue
    print(json.dumps({"start": name}), flush=True)
    try:
        importlib.import_module(name)
        print(json.dumps({"ok": name}), flush=True)
    except BaseException as exc:
        text = traceback.format_exception_only(type(exc), exc)[-1].strip().splitlines()
        print(json.dumps({"failed": name, "error": text[0] if text else type(exc).__name__}), flush=True)
sys.stdout.flush(); sys.stderr.flush()
os._exit(0)  # every module answered: tearing down an interpreter that imported them all takes seconds
"""
_MAX_CRASHES = 20


@dataclass
class Imports:
    image: str
    platform: str
    modules: dict[str, str] = field(default_factory=dict)  # module -> its distribution
    imported: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (module, the traceback's last line)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (module, why)
    seconds: float = 0.0
    recorded: str = ""  # the image ID whose earlier passing check answered this one

    @property
    def ok(self) -> bool:
        return not self.failed

    def said(self) -> list[str]:
        """What a build says of it when it passed."""
        return [self.lines()[-1] + f" ({len(self.imported)} modules)"]

    def to_json(self) -> JsonDoc:
        return {"image": self.image, "platform": self.platform, "ok": self.ok, "imported": self.imported,
                "failed": [{"module": m, "distribution": self.modules.get(m, ""), "error": e} for m, e in self.failed],
                "skipped": [{"module": m, "why": w} for m, w in self.skipped], "seconds": round(self.seconds, 2),
                "recorded": bool(self.recorded)}

    def lines(self) -> list[str]:
        out = [f"{self.image} ({self.platform}): {len(self.imported)} of {len(self.modules)} top-level module(s) "
               f"imported"]
        out += [f"  skipped {m}: {w}" for m, w in self.skipped]
        out += [f"  FAILED import {m} ({self.modules.get(m, '?')}): {e}" if not m.startswith("(") else
                f"  FAILED {m[1:-1]}: {e}" for m, e in self.failed]
        verdict = "ok" if self.ok else "FAILED"
        if self.recorded:
            out.append(f"{self.image} ({self.platform}): imports {verdict} (recorded when image {self.recorded[:19]} "
                       f"was checked, in {self.seconds:.1f}s)")
        else:
            out.append(f"{self.image} ({self.platform}): imports {verdict} in {self.seconds:.1f}s")
        return out


def site_folders(plan: ImagePlan) -> tuple[str, list[str]]:
    """The interpreter and the site-packages folders enginebuild installs into."""
    interpreter, folders = "python3", []
    for node in plan.runtime.layers:
        site = node.payload.python_site()
        if site is not None:
            interpreter = site[0] or interpreter
            if site[1] not in folders:
                folders.append(site[1])
    return interpreter, folders


def check_python(plan: ImagePlan) -> tuple[str, ...]:
    """How a check runs the image's interpreter: its bytecode trusted (`--check-hash-based-pycs
    never`, no source read and hashed as a module is imported) where the plan shows it cannot be
    stale: the image has bytecode layers, those below the first of them are all compiled, and
    every layer above it that may hold a `.py` file is compiled by a bytecode layer above it (an
    edited file's bytecode above the stale one). A run of the image itself keeps the checked
    hashes (a module mounted over the image's would not be)."""
    interpreter = site_folders(plan)[0]
    layers = plan.runtime.layers
    first = next((i for i, n in enumerate(layers) if n.kind == "bytecode"), None)
    if first is None or any(n.payload.may_hold_python_source() and not _compiled_above(layers, i)
                            for i, n in enumerate(layers) if i > first):
        return (interpreter,)
    return (interpreter, "--check-hash-based-pycs", "never")


def _compiled_above(layers: tuple[LayerNode, ...], index: int) -> bool:
    """Whether a bytecode layer above layer `index` compiles it."""
    source = layers[index].stored_as
    return any(source in n.payload.compiles() for n in layers[index + 1:])


def check_imports(engine: EngineApi, tag: str, plan: ImagePlan, check: ImportCheck, store: Store | None = None) -> Imports:
    """`store`: answer from, and record into, its records of passing checks (see above)."""
    interpreter, folders = site_folders(plan)
    python = check_python(plan)
    image_id = engine.image_id(tag) if store is not None else None
    if store is None or not image_id:
        return _run_imports(engine, tag, plan, check, python, folders)
    key = sha256_bytes(json.dumps([image_id, interpreter, folders, sorted(check.env), sorted(check.skip),
                                   sha256_bytes(SCRIPT.encode())]).encode())
    kept = Verdicts(store).kept("imports", key)
    if kept is not None:
        return Imports(plan.image, plan.platform, modules=dict(kept.found["modules"]),
                       imported=list(kept.found["imported"]), skipped=list(check.skip), seconds=kept.seconds,
                       recorded=image_id)
    result = _run_imports(engine, tag, plan, check, python, folders)
    if result.ok:
        Verdicts(store).keep("imports", key, {"modules": result.modules, "imported": result.imported},
                             result.seconds, image_id)
    return result


def _run_imports(engine: EngineApi, tag: str, plan: ImagePlan, check: ImportCheck, python: Sequence[str],
                 folders: list[str]) -> Imports:
    start = time.monotonic()
    result = Imports(plan.image, plan.platform, skipped=list(check.skip))
    skip = [m for m, _ in check.skip]
    done: list[str] = []
    for _ in range(_MAX_CRASHES):
        status, out, err = engine.run(tag, [*python, "-c", SCRIPT, json.dumps(folders), json.dumps(skip),
                                            json.dumps(done)], dict(check.env))
        started = ""
        for line in out.decode("utf-8", "replace").splitlines():
            try:
                event = loads(line)
            except ValueError:
                continue  # a module's own print
            if not isinstance(event, dict):
                continue
            if "modules" in event:
                result.modules = dict(event["modules"])
            elif "start" in event:
                started = str(event["start"])
            elif "ok" in event:
                result.imported.append(started)
                done.append(started)
                started = ""
            elif "failed" in event:
                result.failed.append((started, str(event["error"])))
                done.append(started)
                started = ""
        if not started:
            if status != 0 and not result.modules:
                tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {status}"]
                result.failed.append(("(interpreter)", f"{python[0]} did not start: {tail[0]}"))
            break
        tail = err.decode("utf-8", "replace").strip().splitlines()[-1:]
        result.failed.append((started, f"the interpreter died (exit status {status})"
                                       + (f": {tail[0]}" if tail else "")))
        done.append(started)
    result.seconds = time.monotonic() - start
    return result
