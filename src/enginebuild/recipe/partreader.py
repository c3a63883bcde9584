"""Reading a spec's environments (system packages, Python), steps and components."""

from __future__ import annotations

import dataclasses
import difflib
import posixpath
import re
from typing import Any

from packaging.utils import canonicalize_name

from enginebuild.core.yamlload import YList, YMap
from enginebuild.errors import SpecError
from enginebuild.io.files import image_mode
from enginebuild.io.recipefiles import open_recipe_file
from enginebuild.io.tarrules import dropped_by
from enginebuild.recipe import model as m
from enginebuild.recipe.model import ENV_REF
from enginebuild.recipe.reader import Reader
from enginebuild.sources.base import DEFAULT_INDEX
from enginebuild.sources.globs import declared_matcher

# set by enginebuild in every component build (plan/templates/component.Dockerfile)
RELEASE_WHEELS = "/opt/enginebuild/out"  # where a release component's wheel is, for what needs it
RESERVED_ARGS = ("SOURCE_DATE_EPOCH", "PYTHONHASHSEED")



class PartReader(Reader):
    # -- environments --------------------------------------------------------------------
    def system(self, node: Any, path: str) -> m.System | None:
        if node is None:
            return None
        archives = []
        for i, a in enumerate(self.get(node, "archives", path, ()) or ()):
            sub = f"{path}.archives[{i}]"
            self.wheres[sub] = node["archives"].at(i) if isinstance(node["archives"], YList) else self.where(path)
            keyring = None
            if a.get("keyring"):
                k = a["keyring"]
                file = self.local_file(k["file"], f"{sub}.keyring")[0] if k.get("file") else None
                keyring = m.Keyring(file, k.get("url"), k.get("sha256"), k.get("file") or k.get("url"))
                if not a.get("fingerprint"):
                    raise SpecError(self.where(sub), f"{sub}.fingerprint",
                                    "an archive with its own keyring needs the fingerprint of its signing key")
            flat = bool(a.get("flat", False))
            archives.append(m.Archive(a["url"].rstrip("/"), a.get("suite", "/" if flat else m.DEFAULT_SUITE),
                                      tuple(a.get("components", () if flat else ("main",))), flat, keyring,
                                      a.get("fingerprint")))
        if not archives:
            archives = [m.Archive(m.DEFAULT_ARCHIVE_URL, m.DEFAULT_SUITE, ("main",), False, None, None)]
        return m.System(
            packages=tuple(self.get(node, "packages", path, ()) or ()),
            archives=tuple(archives),
            install=self.get(node, "install", path, "dpkg"),
            upgrade=bool(self.get(node, "upgrade", path, False)),
            run=_commands(self.get(node, "run", path, ())),
        )

    def python(self, node: Any, path: str) -> m.Python | None:
        if node is None:
            return None
        version = self.get(node, "version", path, None)
        if not version:  # the interpreter every wheel is chosen for: never guessed
            raise SpecError(self.where(path), f"{path}.version" if path else "python.version",
                            "required: the Python version of the image's interpreter (wheels are chosen for it)",
                            hint="write the base's or the system packages' Python, such as version: \"3.11\" for "
                                 "Debian 12's python3 or \"3.12\" for Ubuntu 24.04's")
        version = str(version)
        indexes = self.pairs(self.get(node, "indexes", path), f"{path}.indexes")
        names = {n for n, _ in indexes}
        reqs = []
        items = self.get(node, "requirements", path, ()) or ()
        for i, item in enumerate(items):
            where = items.at(i) if isinstance(items, YList) else self.where(path)
            self.wheres[f"{path}.requirements[{i}]"] = where
            if isinstance(item, str):
                reqs.append(m.PyRequirement(item, where))
                continue
            git = item.get("git") or {}
            if item.get("index") and item["index"] not in names:
                raise SpecError(where, f"{path}.requirements[{i}].index",
                                f"no index named {item['index']!r} in {path}.indexes")
            if item.get("url") and not item.get("sha256"):
                raise SpecError(where, f"{path}.requirements[{i}].sha256", "a URL requirement needs its sha256")
            if item.get("requires-from") and not item.get("component"):
                raise SpecError(where, f"{path}.requirements[{i}].requires-from",
                                "requires-from reads a component's source: it goes with `component`")
            if item.get("exclude") and (not item.get("component") or item.get("deps") is False):
                raise SpecError(where, f"{path}.requirements[{i}].exclude",
                                "exclude leaves names out of what a component's source states its wheel needs: it "
                                "goes with `component` (and its deps)")
            if item.get("requires-from") and item.get("deps") is False:
                raise SpecError(where, f"{path}.requirements[{i}].requires-from",
                                "requires-from says what to install with the wheel, deps: false says nothing")
            reqs.append(m.PyRequirement(item["requirement"], where, item.get("index"), git.get("url"), git.get("ref"),
                                        item.get("url"), item.get("sha256"), item.get("component"),
                                        bool(item.get("deps", True)), tuple(item.get("requires-from") or ()),
                                        tuple(sorted(canonicalize_name(n) for n in item.get("exclude") or ()))))
        seen: dict[str, int] = {}
        for i, req in enumerate(reqs):
            if req.name in seen:
                raise SpecError(req.where, f"{path}.requirements[{i}]",
                                f"{req.name} is already required by {path}.requirements[{seen[req.name]}]")
            seen[req.name] = i
        return m.Python(
            version=version, requirements=tuple(reqs), indexes=indexes,
            site_packages=self.get(node, "site-packages", path, f"/usr/local/lib/python{version}/dist-packages"),
            interpreter=self.get(node, "interpreter", path, "/usr/bin/python3"),
            constraints=tuple(self.get(node, "constraints", path, ()) or ()),
            overrides=tuple(self.get(node, "overrides", path, ()) or ()),
        )

    def environment(self, node: Any, path: str, default: m.Environment | None = None) -> m.Environment:
        if isinstance(node, str):
            return self.named_environment(node, path)
        prefix = f"{path}." if path else ""
        base = self.get(node, "base", path, default.base if default else None)
        if base is None:
            raise SpecError(self.where(path), f"{prefix}base", "required key is missing")
        system = self.system(self.get(node, "system", path), f"{prefix}system")
        python = self.python(self.get(node, "python", path), f"{prefix}python")
        if default is not None and node is not None:
            system = system if "system" in node else default.system
            python = python if "python" in node else default.python
        return m.Environment(base, system, python)

    def named_environment(self, name: str, path: str) -> m.Environment:
        """`builder: NAME`: the runtime's environment, or one of `environments`, read once."""
        if name == "runtime":
            assert self.runtime is not None
            return self.runtime
        named = self.tree.get("environments") or {}
        if name not in named or named[name] is None:
            close = difflib.get_close_matches(name, [*named, "runtime"], n=1)
            raise SpecError(self.where(path), path, f"no environment named {name!r} (environments: "
                            f"{', '.join(sorted(named)) or 'none'}; or runtime)",
                            hint=f"did you mean {close[0]!r}?" if close else "declare it under environments:")
        if name not in self.named:
            self.named[name] = self.environment(named[name], f"environments.{name}")
        return self.named[name]

    # -- steps, components -------------------------------------------------------------
    def steps(self, node: Any, path: str) -> tuple[m.Step, ...]:
        out = []
        for i, item in enumerate(node or ()):
            if isinstance(node, YList):
                self.wheres[f"{path}[{i}]"] = node.at(i)
            if isinstance(item, str):
                out.append(m.Step(f"step-{i + 1}", item))
            else:
                run = item["run"] if isinstance(item["run"], str) else tuple(item["run"])
                files = []
                for j, rel in enumerate(item.get("files") or ()):
                    if isinstance(item, YMap) and isinstance(item.get("files"), YList):
                        self.wheres[f"{path}[{i}].files[{j}]"] = item["files"].at(j)
                    real, display = self.local_file(rel, f"{path}[{i}].files[{j}]")
                    # mounted under the name the spec gives it, even when that name is a link to another file
                    files.append(m.FileEntry(str(rel).rstrip("/").rsplit("/", 1)[-1], image_mode(real.stat().st_mode),
                                             display, src=real))
                names = [f.dest for f in files]
                odd = next((n for n in names if not re.fullmatch(r"[A-Za-z0-9._@+-]+", n)), None)
                if odd is not None:
                    raise SpecError(self.where(f"{path}[{i}].files"), f"{path}[{i}].files",
                                    f"a step's file is mounted at /opt/enginebuild/step/NAME, and {odd!r} cannot be "
                                    "such a name (BuildKit reads a mount's options split at ',' and '=')",
                                    hint="name it with letters, digits and ._@+- only")
                if len(set(names)) != len(names):
                    raise SpecError(self.where(f"{path}[{i}].files"), f"{path}[{i}].files",
                                    "two files of one step have the same name (they share one folder)")
                out.append(m.Step(item.get("name") or f"step-{i + 1}", run, tuple(item.get("secrets") or ()),
                                  tuple(item.get("cache") or ()), tuple(files)))
        names = [s.name for s in out]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise SpecError(self.where(path), path, f"two steps are named {dup!r}")
        return tuple(out)

    def literal_arg(self, path: str, key: str, value: Any) -> Any:
        """A build argument is a literal: nothing expands in it, so `$NAME` is refused rather than
        passed on as text; `$$` writes a dollar, as in env."""
        if not isinstance(value, str):
            return value

        def one(found: re.Match[str]) -> str:
            if found.group("dollar"):
                return "$"
            raise SpecError(self.where(f"{path}.build.args.{key}"), f"{path}.build.args.{key}",
                            f"refers to {found.group(0)}: a build argument is a literal value, nothing expands in it",
                            hint="write the value itself ($$ for a dollar), or expand the variable in the build "
                                 f"script (\"${{{key}}}\" there is the argument; the builder's own variables are set)")

        return ENV_REF.sub(one, value)

    def release(self, node: Any, path: str, name: str) -> m.Release | None:
        if node is None:
            return None
        self.get(node, "version", path)
        return m.Release(str(node.get("name") or name), str(node["version"]), str(node.get("index") or DEFAULT_INDEX))

    def build_script(self, build_node: Any, path: str) -> m.FileEntry | None:
        if build_node is None:
            return None
        script, display = self.local_file(self.get(build_node, "script", f"{path}.build"), f"{path}.build.script")
        with open_recipe_file(script, str(self.root)) as handle:
            first = handle.readline(256)
        if not first.startswith(b"#!") or len(first.split()) == 0 or first[2:].strip() == b"":
            raise SpecError(self.where(f"{path}.build.script"), f"{path}.build.script",
                            f"{display} does not start with a #! line: a build script runs with the interpreter "
                            "it names", hint="start it with #!/bin/sh or #!/bin/bash")
        return m.FileEntry("", 0o755, display, src=script)

    def release_problem(self, comp: m.Component) -> None:
        """A component taken from a release wheel builds nothing: it needs nothing, and no patch of
        its stack may reach the files its build would read (the release's compiled code lacks it)."""
        path = f"components.{comp.name}"
        if comp.needs:
            raise SpecError(self.where(f"{path}.needs"), f"{path}.needs",
                            "a component taken from a release wheel builds nothing, so it needs no component",
                            hint="drop needs, or build the component from its source (drop release)")
        declared = declared_matcher(comp.inputs) if comp.inputs else None
        for ref in comp.patches:
            reached = [f.path for f in ref.patch.files if declared is None or declared(f.path)]
            if reached:
                raise SpecError(self.where(f"{path}.release"), f"{path}.release",
                                f"patches/{ref.name} changes {reached[0]}, "
                                + ("and the component declares no inputs, so every file of its source counts"
                                   if declared is None else "one of the component's declared inputs")
                                + f": the release wheel of {comp.release.name if comp.release else ''} was built "
                                  "without it",
                                hint="build the component from its patched source (drop release), or declare the "
                                     "inputs its build reads so a patch outside them is known not to reach it")

    def outputs(self, node: YMap, path: str, from_release: bool) -> m.Outputs:
        """What a component's build keeps (a release wheel's component: that wheel)."""
        out_node = self.get(node, "outputs", path)
        if out_node is None and not from_release:
            raise SpecError(self.where(path), f"{path}.outputs", "required key is missing",
                            hint="what the build keeps: {wheels: DIR}, {prefix: DIR}, {paths: [...]} or {editable: DIR}")
        if out_node is None:
            return m.Outputs(m.OutputsKind.WHEELS, (RELEASE_WHEELS,))
        if from_release and "wheels" not in out_node:
            raise SpecError(self.where(f"{path}.outputs"), f"{path}.outputs",
                            "a component taken from a release wheel keeps that wheel: its outputs are {wheels: DIR}",
                            hint="drop outputs (the default is {wheels: /opt/enginebuild/out}) or write {wheels: DIR}")
        if "wheels" in out_node:
            return m.Outputs(m.OutputsKind.WHEELS, (out_node["wheels"],))
        if "prefix" in out_node:
            return m.Outputs(m.OutputsKind.PREFIX, (out_node["prefix"],), out_node.get("to", "/"))
        if "editable" not in out_node:
            return m.Outputs(m.OutputsKind.PATHS, tuple(out_node["paths"]))
        problem = editable_problem(out_node["editable"])
        if problem:
            raise SpecError(self.where(f"{path}.outputs.editable"), f"{path}.outputs.editable", problem,
                            hint="keep the tree in a folder of its own, such as /app/NAME or /opt/NAME")
        if not node.get("source"):
            raise SpecError(self.where(f"{path}.outputs.editable"), f"{path}.outputs.editable",
                            "an editable install keeps the component's source tree: it has no `source`",
                            hint="give the component the source it installs (git, pypi, path or url)")
        return m.Outputs(m.OutputsKind.EDITABLE, (out_node["editable"],))

    def component(self, name: str, node: YMap, path: str, builder: m.Environment) -> m.Component:
        release = self.release(self.get(node, "release", path), f"{path}.release", name)
        build_node = self.get(node, "build", path) or {}
        script = self.build_script(build_node or None, path)
        build = m.Build(script=script,
                        args=self.pairs(self.get(build_node, "args", f"{path}.build"), f"{path}.build.args"),
                        cache=tuple(self.get(build_node, "cache", f"{path}.build", ()) or ()),
                        secrets=tuple(self.get(build_node, "secrets", f"{path}.build", ()) or ()))
        build = dataclasses.replace(build, args=tuple((k, self.literal_arg(path, k, v)) for k, v in build.args))
        for key, _ in build.args:
            if key in RESERVED_ARGS or key.startswith("ENGINEBUILD_"):
                raise SpecError(self.where(f"{path}.build.args.{key}"), f"{path}.build.args.{key}",
                                f"{key} is set by enginebuild in every component build (reproducible "
                                "time stamps and hashing, the build's own paths); a build argument cannot change it",
                                hint="drop it from build.args: SOURCE_DATE_EPOCH is taken from the environment "
                                     "of `image` (default 1)")
        outputs = self.outputs(node, path, release is not None)
        extra = []
        for sname, snode in (self.get(node, "sources", path) or {}).items():
            if snode is None:
                continue
            sub = f"{path}.sources.{sname}"
            self.get(node["sources"], sname, f"{path}.sources")
            extra.append(m.ExtraSource(sname, self.source(self.get(snode, "source", sub), f"{sub}.source", sname),
                                       snode.get("env")))
        source_node = self.get(node, "source", path)
        cbuilder = self.environment(self.get(node, "builder", path), f"{path}.builder", builder) \
            if "builder" in node else builder
        return m.Component(
            name=name,
            source=self.source(source_node, f"{path}.source", name) if source_node else None,
            sources=tuple(extra),
            patches=self.patches(self.get(node, "patches", path), f"{path}.patches"),
            builder=cbuilder, build=build,
            needs=tuple(self.get(node, "needs", path, ()) or ()),
            outputs=outputs,
            steps=self.steps(self.get(node, "steps", path), f"{path}.steps"),
            cuda_archs=tuple(self.get(node, "cuda-archs", path, ()) or ()),
            where=self.where(path),
            inputs=tuple(self.get(node, "inputs", path, ()) or ()),
            release=release,
            patches_as_files=self.get(node, "patches-as-files", path, True) is not False,
        )

    def components(self, node: Any, builder: m.Environment) -> tuple[m.Component, ...]:
        found = {}
        for name, cnode in (node or {}).items():
            if cnode is None:
                continue
            self.get(node, name, "components")
            comp = self.component(name, cnode, f"components.{name}", builder)
            if comp.release is not None:  # what would build it is not used (an inherited build stays unused)
                self.release_problem(comp)
                comp = dataclasses.replace(comp, source=None, sources=(), patches=(), steps=(), inputs=(),
                                           build=m.Build(None))
            if comp.patches and comp.source is None:
                raise SpecError(comp.where, f"components.{name}.patches", "a patch stack needs a source to apply to")
            found[name] = comp
        for comp in found.values():
            for need in comp.needs:
                if need not in found:
                    raise SpecError(self.where(f"components.{comp.name}.needs"), f"components.{comp.name}.needs",
                                    f"no component named {need!r}")
        return tuple(found[n] for n in topo_order(found, self))


def topo_order(found: dict[str, m.Component], reader: Reader) -> list[str]:
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            cycle = " -> ".join(trail[trail.index(name):] + [name])
            raise SpecError(reader.where(f"components.{name}.needs"), f"components.{name}.needs",
                            f"cycle in needs: {cycle}")
        state[name] = "visiting"
        for need in found[name].needs:
            visit(need, trail + [name])
        state[name] = "done"
        order.append(name)

    for name in sorted(found):
        visit(name, [])
    return order


def _commands(value: Any) -> tuple[str | tuple[str, ...], ...]:
    """`system.run`: one shell command, or a list of commands (each a shell command or an exec list)."""
    if isinstance(value, str):
        return (value,)
    return tuple(c if isinstance(c, str) else tuple(c) for c in value or ())


EDITABLE_ROOTS = ("/app", "/opt", "/srv", "/workspace", "/home", "/root", "/src", "/usr/local/src")


def editable_problem(folder: str) -> str | None:
    """Why an editable tree may not live at `folder`: it must be a folder of its own under one of
    EDITABLE_ROOTS (never /, /tmp that layer clean-up empties, a system folder or enginebuild's own)."""

    clean = posixpath.normpath(folder)
    if clean == "/opt/enginebuild" or clean.startswith("/opt/enginebuild/"):
        return f"{folder} is enginebuild's own folder in the image"
    if not any(clean.startswith(root + "/") for root in EDITABLE_ROOTS):
        return (f"{folder} is not a folder of its own under {', '.join(EDITABLE_ROOTS)} (the tree replaces the "
                "folder's contents; /, /tmp and system folders are never one)")
    pattern = dropped_by(clean.lstrip("/") + "/pkg/module.py")  # what a tree there holds: is it dropped?
    if pattern is not None:
        return f"{folder} lies where layer clean-up drops what a build leaves (/{pattern}): the tree would not reach " \
               "the image"
    return None
