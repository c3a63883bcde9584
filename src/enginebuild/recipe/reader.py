"""Reading a validated, merged spec tree into an ImageSpec, remembering where each key was written."""

from __future__ import annotations

import dataclasses
import difflib
import os
import posixpath
import re
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.utils import canonicalize_name

from enginebuild.core.cudacompat import DRIVER_CUDA
from enginebuild.core.patchfile import HEADER_SUFFIX, PatchError, parse_patch, with_header_file
from enginebuild.core.yamlload import YList, YMap
from enginebuild.errors import SpecError, Where
from enginebuild.io.files import image_mode
from enginebuild.io.recipefiles import open_recipe_file, read_recipe_file
from enginebuild.io.tarrules import dropped_by
from enginebuild.recipe import model as m
from enginebuild.recipe.listing import listed
from enginebuild.recipe.model import ENV_REF
from enginebuild.recipe.patchchecks import read_checks
from enginebuild.sources import Source, kind
from enginebuild.sources.base import DEFAULT_INDEX, Place
from enginebuild.sources.globs import declared_matcher

# set by enginebuild in every component build (plan/templates/component.Dockerfile)
RELEASE_WHEELS = "/opt/enginebuild/out"  # where a release component's wheel is, for what needs it
RESERVED_ARGS = ("SOURCE_DATE_EPOCH", "PYTHONHASHSEED")


def env_references(value: str) -> list[str]:
    """The variables a value refers to (`$NAME`, `${NAME}`, `${NAME:-default}`; `$$` is a dollar)."""
    names = []
    for match in ENV_REF.finditer(value):
        name = match.group("braced") or match.group("bare")
        if name:
            names.append(name)
    stray = ENV_REF.sub("", value)
    if "$" in stray:
        raise ValueError("a `$` that starts no variable reference; write `$$` for a literal dollar")
    return names


def places(node: Any, path: str = "") -> dict[str, Where]:
    """Where each key (`a.b`) and list item (`a[0]`) of a merged tree was written."""
    out: dict[str, Where] = {}
    if isinstance(node, YMap):
        for key, value in node.items():
            full = f"{path}.{key}" if path else str(key)
            out[full] = node.at(key)
            out.update(places(value, full))
    elif isinstance(node, YList):
        for i, value in enumerate(node):
            out[f"{path}[{i}]"] = node.at(i)
            out.update(places(value, f"{path}[{i}]"))
    return out


class Reader:
    def __init__(self, root: Path, tree: YMap):
        self.root = root
        self.tree = tree
        # every key where it was written (after merging: a parent's, a variant's or a --set's own
        # place), so a message about one key of a mapping a --set touched names that key's file
        self.wheres: dict[str, Where] = places(tree)
        self.runtime: m.Environment | None = None
        self.named: dict[str, m.Environment] = {}

    # -- locating ------------------------------------------------------------------------
    def get(self, node: Any, key: str, path: str, default: Any = None) -> Any:
        if not isinstance(node, dict) or key not in node or node[key] is None:
            return default
        full = f"{path}.{key}" if path else key
        if isinstance(node, YMap):
            self.wheres[full] = node.at(key)
        return node[key]

    def where(self, path: str) -> Where:
        while path:
            if path in self.wheres:
                return self.wheres[path]
            path = path.rpartition(".")[0]
        return self.tree.where

    def folder(self, path: str) -> Path:
        return (self.root / PurePosixPath(self.where(path).file).parent).resolve()

    def place(self, path: str) -> Place:
        return Place(self.root, self.folder(path), self.where(path))

    def pairs(self, node: Any, path: str) -> tuple[tuple[str, str], ...]:
        out = []
        for key, value in (node or {}).items():
            if value is None:
                continue
            if isinstance(node, YMap):
                self.wheres[f"{path}.{key}"] = node.at(key)
            out.append((key, str(value)))
        return tuple(out)

    def display(self, path: Path) -> str:
        try:
            return str(PurePosixPath(path.relative_to(self.root)))
        except ValueError:
            return str(path)

    def inside_repository(self, real: Path, rel: str, path: str) -> None:
        """Recipe files may live anywhere inside the recipe repository (a shared scripts/ folder
        reached with ..), never outside it, by a path or through a symlink."""
        root = self.root.resolve()
        if real != root and root not in real.parents:
            raise SpecError(self.where(path), path, f"{rel!r} resolves outside the recipe repository (to {real})",
                            hint="files must live inside the recipe repository; copy it in instead of linking to it")

    def local_file(self, rel: str, path: str) -> tuple[Path, str]:
        where, folder = self.where(path), self.folder(path)
        candidate = folder / rel
        self.inside_repository(Path(os.path.normpath(candidate)), rel, path)  # by its words, before the disk
        if not candidate.exists() and not candidate.is_symlink():
            raise SpecError(where, path, f"file not found: {self.display(candidate)}",
                            hint=_did_you_mean(rel, candidate.parent, "*"))
        real = candidate.resolve()
        self.inside_repository(real, rel, path)
        if not real.is_file():
            raise SpecError(where, path, f"expected a regular file: {rel}")
        return real, self.display(Path(os.path.normpath(candidate)))

    # -- files -----------------------------------------------------------------------------
    def file_group(self, dest: str, entry: Any, path: str) -> m.FileGroup:
        where = self.where(path)
        mode_text = entry.get("mode") if isinstance(entry, dict) else None
        forced = int(mode_text, 8) if mode_text else None
        if isinstance(entry, dict) and "url" in entry:
            name = dest if not dest.endswith("/") else dest + entry["url"].rstrip("/").rsplit("/", 1)[-1]
            return m.FileGroup(dest, (m.FileEntry(name, forced or 0o644, entry["url"], url=entry["url"],
                                                  sha256=entry["sha256"]),), where)
        rel = entry["src"] if isinstance(entry, dict) else entry
        src_path = f"{path}.src" if isinstance(entry, dict) else path
        folder = self.folder(src_path)
        fixed = rel.split("*")[0].split("?")[0]  # what a glob cannot change: checked by its words, before any listing
        self.inside_repository(Path(os.path.normpath(folder / fixed)) if fixed else folder, rel, src_path)
        if any(c in rel for c in "*?"):
            if not dest.endswith("/"):
                raise SpecError(where, path, f"a glob ({rel}) copies several files: end the destination with /")
            matches = listed("glob", folder, rel)
            if not matches:
                raise SpecError(where, path, f"{rel!r} matches no file in {self.display(folder)}")
            entries = [self._entry(dest + p.name, p, forced, src_path) for p in matches]
            return m.FileGroup(dest, tuple(entries), where, ("glob", str(folder), rel))
        candidate = folder / rel.rstrip("/")
        if candidate.is_dir():
            real = candidate.resolve()
            self.inside_repository(real, rel, path)
            base = dest.rstrip("/")
            entries = [self._entry(f"{base}/{p.relative_to(candidate).as_posix()}", p, forced, src_path)
                       for p in listed("folder", candidate, "")]
            if not entries:
                raise SpecError(where, path, f"folder {rel!r} is empty")
            return m.FileGroup(dest, tuple(entries), where, ("folder", str(candidate), ""))
        src, display = self.local_file(rel, src_path)
        name = dest + candidate.name if dest.endswith("/") else dest
        mode = forced if forced is not None else image_mode(src.stat().st_mode)
        return m.FileGroup(dest, (m.FileEntry(name, mode, display, src=src, mode_given=forced is not None),), where)

    def _entry(self, dest: str, path: Path, forced: int | None, spec_path: str) -> m.FileEntry:
        real, display = self.local_file(os.path.relpath(path, self.folder(spec_path)), spec_path)
        mode = forced if forced is not None else image_mode(real.stat().st_mode)
        return m.FileEntry(dest, mode, display, src=real, mode_given=forced is not None)

    def files(self, node: Any, path: str) -> tuple[m.FileGroup, ...]:
        out = []
        for dest in sorted(node or {}):
            entry = self.get(node, dest, path)
            if entry is not None:
                out.append(self.file_group(dest, entry, f"{path}.{dest}"))
        seen: dict[str, str] = {}
        for group in out:
            for entry in group.entries:
                if entry.dest in seen:
                    raise SpecError(group.where, f"{path}.{group.key}",
                                    f"{entry.dest} is also written by files.{seen[entry.dest]}")
                seen[entry.dest] = group.key
        return tuple(out)

    # -- sources and patches -------------------------------------------------------------
    def source(self, node: Any, path: str, default_name: str) -> Source:
        (name, value), = [(k, v) for k, v in node.items() if v is not None]
        sub = f"{path}.{name}"
        self.get(node, name, path)
        impl = kind(name)
        try:
            request = impl.request(value, self.place(sub), default_name)
        except SpecError as exc:
            raise SpecError(self.where(sub), sub, exc.message.split(": ", 1)[-1], hint=exc.hint) from None
        return Source(name, request, self.where(sub))

    def patches(self, names: Any, path: str) -> tuple[m.PatchRef, ...]:
        out = []
        patch_root = (self.root / "patches").resolve()
        for i, name in enumerate(names or ()):
            sub = f"{path}[{i}]"
            where = names.at(i) if isinstance(names, YList) else self.where(path)
            self.wheres[sub] = where
            candidate = patch_root / name
            if not candidate.exists():
                raise SpecError(where, sub, f"patch not found: patches/{name}",
                                hint=_did_you_mean(name, patch_root, "**/*.patch", "**/*.diff"))
            real = candidate.resolve()
            if patch_root not in real.parents or not real.is_file():
                raise SpecError(where, sub, f"patches/{name} must be a regular file inside patches/")
            try:
                parsed = parse_patch(name, read_recipe_file(real, str(self.root)))
                sidecar = real.with_name(real.name + HEADER_SUFFIX)
                if sidecar.is_file():
                    parsed = with_header_file(parsed, f"{name}{HEADER_SUFFIX}",
                                              read_recipe_file(sidecar, str(self.root)))
            except PatchError as exc:
                raise SpecError(where, sub, exc.message) from None
            checks = read_checks(real, name, self.root)  # its own file's errors name that file
            out.append(m.PatchRef(name=name, path=real, where=where, patch=parsed, checks=checks))
        return tuple(out)

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
            return m.Outputs("wheels", (RELEASE_WHEELS,))
        if from_release and "wheels" not in out_node:
            raise SpecError(self.where(f"{path}.outputs"), f"{path}.outputs",
                            "a component taken from a release wheel keeps that wheel: its outputs are {wheels: DIR}",
                            hint="drop outputs (the default is {wheels: /opt/enginebuild/out}) or write {wheels: DIR}")
        if "wheels" in out_node:
            return m.Outputs("wheels", (out_node["wheels"],))
        if "prefix" in out_node:
            return m.Outputs("prefix", (out_node["prefix"],), out_node.get("to", "/"))
        if "editable" not in out_node:
            return m.Outputs("paths", tuple(out_node["paths"]))
        problem = editable_problem(out_node["editable"])
        if problem:
            raise SpecError(self.where(f"{path}.outputs.editable"), f"{path}.outputs.editable", problem,
                            hint="keep the tree in a folder of its own, such as /app/NAME or /opt/NAME")
        if not node.get("source"):
            raise SpecError(self.where(f"{path}.outputs.editable"), f"{path}.outputs.editable",
                            "an editable install keeps the component's source tree: it has no `source`",
                            hint="give the component the source it installs (git, pypi, path or url)")
        return m.Outputs("editable", (out_node["editable"],))

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


def check_env_references(reader: Reader, env: tuple[tuple[str, str], ...], where: str = "env") -> None:
    for key, value in env:
        try:
            env_references(value)
        except ValueError as exc:
            raise SpecError(reader.where(f"{where}.{key}"), f"{where}.{key}", str(exc)) from None


def _commands(value: Any) -> tuple[str | tuple[str, ...], ...]:
    """`system.run`: one shell command, or a list of commands (each a shell command or an exec list)."""
    if isinstance(value, str):
        return (value,)
    return tuple(c if isinstance(c, str) else tuple(c) for c in value or ())


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
        if by_name[cname].outputs.kind == "editable":
            raise SpecError(r.where("install"), f"install[{i}]",
                            f"component {cname} is an editable install: the Python requirement naming it installs it "
                            "(its tree and its editable wheel)",
                            hint=f"drop it from install and require it: python.requirements: "
                                 f"[{{requirement: NAME, component: {cname}}}]")
    for i, req in enumerate(runtime.python.requirements if runtime.python else ()):
        if req.component and req.component not in by_name:
            raise SpecError(req.where, f"python.requirements[{i}].component", f"no component named {req.component!r}")
        if req.component and by_name[req.component].outputs.kind not in ("wheels", "editable"):
            raise SpecError(req.where, f"python.requirements[{i}].component",
                            f"component {req.component} produces {by_name[req.component].outputs.kind}, not wheels")


def read_image(root: Path, name: str, chain: tuple[str, ...], tree: YMap, variants: tuple[str, ...] = ()) -> m.ImageSpec:
    r = Reader(root, tree)
    abstract = bool(tree.get("abstract"))
    runtime = r.environment(tree, "", m.Environment("scratch") if abstract else None)
    init = bool(r.get(tree, "init", "", False))
    if init:
        runtime = with_init(runtime)
    r.runtime = runtime
    builder = r.environment(r.get(tree, "builder", ""), "builder", m.Environment(runtime.base)) \
        if tree.get("builder") is not None else m.Environment(runtime.base)
    components = r.components(r.get(tree, "components", ""), builder)
    install = tuple(r.get(tree, "install", "", ()) or ())
    _check_component_uses(r, components, install, runtime, abstract)
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
    return m.ImageSpec(
        name=name, file=tree.where.file, chain=chain,
        abstract=bool(r.get(tree, "abstract", "", False)),
        description=r.get(tree, "description", "", ""),
        model=m.Model(**{k: v for k, v in model.items()}),
        platforms=platforms, runtime=runtime, builder=builder, components=components, install=install,
        overlays=tuple(overlays), steps=r.steps(r.get(tree, "steps", ""), "steps"),
        files=r.files(r.get(tree, "files", ""), "files"), env=env,
        workdir=r.get(tree, "workdir", ""), user=r.get(tree, "user", ""),
        shell=tuple(shell) if shell else None, stopsignal=r.get(tree, "stopsignal", ""),
        healthcheck=_healthcheck(r, r.get(tree, "healthcheck", "")),
        expose=tuple(dict.fromkeys(p if "/" in str(p) else f"{p}/tcp" for p in r.get(tree, "expose", "", ()) or ())),
        entrypoint=(INIT, "--", *(entrypoint or ())) if init else tuple(entrypoint) if entrypoint is not None
        else None,
        cmd=tuple(cmd) if cmd is not None else None,
        labels=r.pairs(r.get(tree, "labels", ""), "labels"),
        cuda_archs=tuple(r.get(tree, "cuda-archs", "", ()) or ()),
        scan_allow=tuple(m.ScanAllow(a["path"], a["rule"], a["why"]) for a in scan.get("allow", ())),
        variants=variants, wheres=r.wheres,
        cuda_verify=m.CudaVerify(bool(cuda_verify.get("jit", False)),
                                 tuple(m.CudaSkip(k["path"], k["why"]) for k in cuda_verify.get("skip", ())),
                                 driver_branch(r, cuda_verify.get("driver"))),
        runtime_check=_runtime_check(r, runtime_check),
        manifest=r.get(tree, "manifest", "", "layer"), build_env=build_env,
        bytecode=bool(r.get(tree, "bytecode", "", True)),
        compile_cache=r.pairs(r.get(tree, "compile-cache", ""), "compile-cache"),
    )


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


def _did_you_mean(rel: str, folder: Path, *patterns: str) -> str | None:
    """"did you mean X?" for a missing file: among the files of `folder` that `patterns` match (by
    their path under it: patches/), or among its own folder's files (`*`: by the name)."""
    if not folder.is_dir():
        return None
    by_path = patterns[0].startswith("**")
    names = sorted({str(p.relative_to(folder)) for pattern in patterns for p in folder.glob(pattern) if p.is_file()})
    close = difflib.get_close_matches(rel if by_path else posixpath.basename(rel), names, n=1)
    if not close:
        return None
    return f"did you mean {close[0] if by_path else posixpath.join(posixpath.dirname(rel), close[0])!r}?"
