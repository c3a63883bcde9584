"""Reading a validated, merged spec tree into an ImageSpec, remembering where each key was written."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from enginebuild.core.cudacompat import DRIVER_CUDA
from enginebuild.core.yamlload import YMap
from enginebuild.errors import SpecError
from enginebuild.recipe import model as m
from enginebuild.recipe.model import spec_keys
from enginebuild.recipe.partreader import PartReader
from enginebuild.recipe.reader import Reader, env_references

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


M = TypeVar("M", bound="DataclassInstance")


def check_env_references(reader: Reader, env: tuple[tuple[str, str], ...], where: str = "env") -> None:
    for key, value in env:
        try:
            env_references(value)
        except ValueError as exc:
            raise SpecError(reader.where(f"{where}.{key}"), f"{where}.{key}", str(exc)) from None


def _healthcheck(reader: Reader, node: Any) -> m.Healthcheck | None:
    """A shell command, an exec list, or a list in Docker's own form (`["CMD", ...]`,
    `["CMD-SHELL", "..."]`, `["NONE"]`: the base's check turned off), taken as Docker takes it."""
    if node is None:
        return None
    test = node["test"]
    if isinstance(test, str):
        form: tuple[str, ...] = ("CMD-SHELL", test)
    elif test and test[0] in ("CMD", "CMD-SHELL", "NONE"):
        form = tuple(test)
        shapes = {"CMD": len(form) >= 2, "CMD-SHELL": len(form) == 2, "NONE": len(form) == 1}
        if not shapes[form[0]]:
            needs = {"CMD": "the command after it", "CMD-SHELL": "one shell command after it",
                     "NONE": "nothing after it"}[form[0]]
            raise SpecError(reader.where("healthcheck.test"), "healthcheck.test",
                            f"{form[0]} takes {needs}, got {len(form) - 1} item(s)",
                            hint='as Docker writes it: ["CMD", "curl", "-f", "http://127.0.0.1:8000/health"], '
                                 '["CMD-SHELL", "curl -f http://127.0.0.1:8000/health || exit 1"] or ["NONE"]')
    else:
        form = ("CMD", *test)
    return m.Healthcheck(form, node.get("interval"), node.get("timeout"), node.get("start-period"), node.get("retries"))


def _check_component_uses(r: Reader, components: tuple[m.Component, ...], install: tuple[str, ...],
                          runtime: m.Environment, abstract: bool) -> None:
    """Every component `install:` and the Python requirements name exists and can be used so; declared
    inputs only where there is a source (an abstract spec may leave it to the images extending it)."""
    by_name = {c.name: c for c in components}
    for comp in components:
        if comp.inputs and comp.source is None and not abstract:
            raise SpecError(r.where(f"components.{comp.name}.inputs"), f"components.{comp.name}.inputs",
                            "declared inputs are paths of the component's source: it has none")
    for i, cname in enumerate(install):
        if cname not in by_name:
            raise SpecError(r.where("install"), f"install[{i}]", f"no component named {cname!r}")
        if by_name[cname].outputs.kind is m.OutputsKind.EDITABLE:
            raise SpecError(r.where("install"), f"install[{i}]",
                            f"component {cname} is an editable install: the Python requirement naming it installs it "
                            "(its tree and its editable wheel)",
                            hint=f"drop it from install and require it: python.requirements: "
                                 f"[{{requirement: NAME, component: {cname}}}]")
    for i, req in enumerate(runtime.python.requirements if runtime.python else ()):
        if req.component and req.component not in by_name:
            raise SpecError(req.where, f"python.requirements[{i}].component", f"no component named {req.component!r}")
        if req.component and not by_name[req.component].outputs.kind.installs_wheels:
            raise SpecError(req.where, f"python.requirements[{i}].component",
                            f"component {req.component} produces {by_name[req.component].outputs.kind}, not wheels")


def read_image(root: Path, name: str, chain: tuple[str, ...], tree: YMap, variants: tuple[str, ...] = ()) -> m.ImageSpec:
    r = PartReader(root, tree)
    abstract = bool(tree.get("abstract"))
    runtime = r.environment(tree, "", m.Environment("scratch") if abstract else None)
    init = bool(r.get(tree, "init", "", False))
    if init:
        runtime = with_init(runtime)
    r.runtime = runtime
    builder = r.environment(r.get(tree, "builder", ""), "builder", m.Environment(runtime.base)) \
        if tree.get("builder") is not None else m.Environment(runtime.base)
    components = r.components(r.get(tree, "components", ""), builder)
    _check_component_uses(r, components, tuple(r.get(tree, "install", "", ()) or ()), runtime, abstract)
    overlays = []
    for oname, onode in (r.get(tree, "overlays", "") or {}).items():
        if onode is None:
            continue
        path = f"overlays.{oname}"
        r.get(tree["overlays"], oname, "overlays")
        overlays.append(m.Overlay(oname, r.source(r.get(onode, "source", path), f"{path}.source", oname),
                                  r.get(onode, "installed", path), r.patches(r.get(onode, "patches", path),
                                                                           f"{path}.patches"), r.where(path)))
    platforms = tuple(r.get(tree, "platforms", "", ()) or ()) or (r.get(tree, "platform", "", m.DEFAULT_PLATFORM),)
    env = r.pairs(r.get(tree, "env", ""), "env")
    check_env_references(r, env)
    build_env = r.pairs(r.get(tree, "build-env", ""), "build-env")
    check_env_references(r, build_env, "build-env")
    entrypoint, cmd, shell = r.get(tree, "entrypoint", ""), r.get(tree, "cmd", ""), r.get(tree, "shell", "")
    model = r.get(tree, "model", "", {}) or {}
    scan = r.get(tree, "secret-scan", "", {}) or {}
    cuda_verify = r.get(tree, "cuda-verify", "", {}) or {}
    runtime_check = r.get(tree, "runtime-check", "", {}) or {}
    spec = m.ImageSpec(
        name=name, file=tree.where.file, chain=chain,
        model=m.Model(**{k: v for k, v in model.items()}),
        platforms=platforms, runtime=runtime, builder=builder, components=components,
        overlays=tuple(overlays), steps=r.steps(r.get(tree, "steps", ""), "steps"),
        files=r.files(r.get(tree, "files", ""), "files"), env=env,
        shell=tuple(shell) if shell else None,
        healthcheck=_healthcheck(r, r.get(tree, "healthcheck", "")),
        expose=tuple(dict.fromkeys(p if "/" in str(p) else f"{p}/tcp" for p in r.get(tree, "expose", "", ()) or ())),
        entrypoint=(INIT, "--", *(entrypoint or ())) if init else tuple(entrypoint) if entrypoint is not None
        else None,
        cmd=tuple(cmd) if cmd is not None else None,
        scan_allow=tuple(m.ScanAllow(a["path"], a["rule"], a["why"]) for a in scan.get("allow", ())),
        variants=variants, wheres=r.wheres,
        cuda_verify=m.CudaVerify(bool(cuda_verify.get("jit", False)),
                                 tuple(m.CudaSkip(k["path"], k["why"]) for k in cuda_verify.get("skip", ())),
                                 driver_branch(r, cuda_verify.get("driver"))),
        runtime_check=_runtime_check(r, runtime_check),
        build_env=build_env,
    )
    return with_declared(r, tree, spec)


def with_declared(r: Reader, tree: YMap, made: M) -> M:
    """`made` with each field its model declares with `spec_key` read from that key (the field's
    default where the spec gives none)."""
    values: dict[str, object] = {}
    for f, key in spec_keys(type(made)):
        given = r.get(tree, key.key, "")
        if key.read == "pairs":
            values[f.name] = r.pairs(given, key.key)
        elif given is None:
            values[f.name] = f.default
        else:
            values[f.name] = {"bool": bool, "tuple": tuple}.get(key.read, lambda v: v)(given)
    return dataclasses.replace(made, **values)


def _runtime_check(r: Reader, tree: Any) -> m.RuntimeCheck:
    imports = tree.get("imports")
    return m.RuntimeCheck(
        tuple(m.CudaSkip(k["path"], k["why"]) for k in tree.get("skip", ())),
        m.ImportCheck(r.pairs(imports.get("env"), "runtime-check.imports.env"),
                      tuple((k["name"], k["why"]) for k in imports.get("skip", ()))) if imports is not None else None)


INIT = "/usr/bin/tini-static"  # Debian's tini package: a static init, whatever libc the base has


def with_init(runtime: m.Environment) -> m.Environment:
    """`init: true`: Debian's tini in the runtime's system packages (pinned by `lock` like the
    others; on a base, installed with dpkg, which keeps the base's libc), PID 1 before the
    entrypoint, so that a launcher that ignores SIGTERM still stops on `docker stop`."""
    system = runtime.system
    if system is None:
        system = m.System(("tini",), (m.Archive(m.DEFAULT_ARCHIVE_URL, m.DEFAULT_SUITE, ("main",), False, None, None),),
                          "extract" if runtime.base == "scratch" else "dpkg", False, ())
    elif not any(p.partition("=")[0] == "tini" for p in system.packages):
        system = dataclasses.replace(system, packages=(*system.packages, "tini"))
    return dataclasses.replace(runtime, system=system)


def driver_branch(r: Reader, value: Any) -> int | None:
    """`cuda-verify.driver`, a driver branch whose CUDA version enginebuild knows."""

    if value is None:
        return None
    branch = int(value)
    if branch not in DRIVER_CUDA:
        known = ", ".join(f"{b} (CUDA {c[0]}.{c[1]})" for b, c in sorted(DRIVER_CUDA.items()))
        raise SpecError(r.where("cuda-verify.driver"), "cuda-verify.driver",
                        f"driver branch {branch} is not one enginebuild knows the CUDA version of",
                        hint=f"known: {known}")
    return branch
