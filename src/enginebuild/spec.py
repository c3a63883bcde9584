"""Image specs as frozen dataclasses, built from a validated, merged spec tree."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from enginebuild.errors import SpecError, Where
from enginebuild.patches.patchfile import parse_patch
from enginebuild.yamlload import YList, YMap

DEFAULT_PLATFORM = "linux/arm64"
DEFAULT_ARCHIVE = ("http://deb.debian.org/debian", "bookworm", ("main",))
DEFAULT_INDEX = "https://pypi.org"
DEFAULT_PIP = "python3 -m pip"
DEFAULT_SRC_DIR = "/opt/enginebuild/src"


@dataclass(frozen=True)
class FileEntry:
    dest: str
    src: Path
    display: str  # repo-relative path, for messages
    mode: int


@dataclass(frozen=True)
class Source:
    kind: str  # git | pypi | path
    url: str = ""
    ref: str = ""
    name: str = ""
    version: str = ""
    path: Path | None = None
    display: str = ""

    def describe(self) -> str:
        if self.kind == "git":
            return f"git {self.url} @ {self.ref}"
        if self.kind == "pypi":
            return f"pypi {self.name}=={self.version}"
        return f"path {self.display}"


@dataclass(frozen=True)
class Build:
    script: FileEntry
    args: tuple = ()  # ((name, value), ...) in spec order
    cache: tuple = ()
    secrets: tuple = ()


@dataclass(frozen=True)
class Vendor:
    """A third-party source the engine's build would otherwise download, handed over by path."""

    name: str
    source: Source
    env: str


@dataclass(frozen=True)
class Engine:
    name: str
    source: Source
    installed: str | None
    dest: str
    build: Build | None
    vendor: tuple = ()

    @property
    def overlay(self) -> bool:
        """The base already ships the engine; patches go into its installed package."""
        return self.installed is not None


@dataclass(frozen=True)
class PatchRef:
    name: str  # relative to patches/
    path: Path
    where: Where
    data: bytes = field(default=b"", compare=False, repr=False)
    parsed: object = field(default=None, compare=False, repr=False)  # the linted PatchFile


@dataclass(frozen=True)
class Plugin:
    name: str
    source: Source
    patches: tuple = ()
    files: tuple = ()


@dataclass(frozen=True)
class System:
    packages: tuple
    archive_url: str
    suite: str
    components: tuple
    install: str
    run: tuple  # each a str (shell form) or tuple of str (exec form)


@dataclass(frozen=True)
class Python:
    requirements: tuple
    index: str
    version: str
    pip: str


@dataclass(frozen=True)
class Model:
    name: str = ""
    quantization: str = ""
    format: str = ""
    drafter: str = ""


@dataclass(frozen=True)
class ImageSpec:
    name: str
    file: str
    chain: tuple  # this image and the images it extends, nearest first
    abstract: bool
    description: str
    model: Model
    platform: str
    base: str | None
    system: System | None
    python: Python | None
    engine: Engine | None
    patches: tuple
    plugins: tuple
    files: tuple
    env: tuple
    workdir: str | None
    user: str | None
    expose: tuple
    entrypoint: tuple | None
    cmd: tuple | None
    labels: tuple
    wheres: dict = field(default_factory=dict, compare=False, hash=False)

    def where(self, key: str) -> Where:
        """The file:line a key path was written at, or the spec file itself."""
        while key:
            if key in self.wheres:
                return self.wheres[key]
            key = key.rpartition(".")[0]
        return Where(self.file)

    @property
    def arch(self) -> str:
        return self.platform.split("/", 1)[1].replace("/", "")


class _Builder:
    """Walks a merged, validated tree and records where each key path was written."""

    def __init__(self, root: Path, tree: YMap):
        self.root = root
        self.tree = tree
        self.wheres: dict = {}

    def get(self, node, key: str, path: str, default=None):
        if not isinstance(node, dict) or key not in node:
            return default
        full = f"{path}.{key}" if path else key
        if isinstance(node, YMap):
            self.wheres[full] = node.at(key)
        return node[key]

    def where(self, path: str) -> Where:
        return self.wheres.get(path, self.tree.where)

    def pairs(self, node, path: str) -> tuple:
        """NAME: value mappings (env, labels, build args), each key's line remembered."""
        for key in node or {}:
            if isinstance(node, YMap):
                self.wheres[f"{path}.{key}"] = node.at(key)
        return _pairs(node)

    def local_file(self, rel: str, path: str, *, directory: bool = False) -> tuple:
        where = self.where(path)
        folder = (self.root / PurePosixPath(where.file).parent).resolve()
        candidate = folder / rel
        if not candidate.exists() and not candidate.is_symlink():
            raise SpecError(where, path, f"file not found: {_display(self.root, candidate)}")
        real = candidate.resolve()
        if real != folder and folder not in real.parents:
            raise SpecError(where, path, f"{rel!r} resolves outside the image folder (to {real})",
                            hint="files must live inside the folder of the spec that names them")
        if directory and not real.is_dir():
            raise SpecError(where, path, f"expected a directory: {rel}")
        if not directory and not real.is_file():
            raise SpecError(where, path, f"expected a regular file: {rel}")
        return real, _display(self.root, candidate)

    def files(self, node, path: str) -> tuple:
        out = []
        for dest in sorted(node or {}):
            entry = self.get(node, dest, path)
            sub = f"{path}.{dest}"
            if isinstance(entry, dict):
                rel = self.get(entry, "src", sub)
                mode_text = self.get(entry, "mode", sub)
                src, display = self.local_file(rel, f"{sub}.src")
            else:
                rel, mode_text = entry, None
                src, display = self.local_file(rel, sub)
            mode = int(mode_text, 8) if mode_text else (0o755 if src.stat().st_mode & 0o111 else 0o644)
            out.append(FileEntry(dest=dest, src=src, display=display, mode=mode))
        return tuple(out)

    def source(self, node, path: str, default_name: str) -> Source:
        if "git" in node:
            git = self.get(node, "git", path)
            ref = self.get(git, "ref", f"{path}.git") or self.get(git, "commit", f"{path}.git")
            return Source("git", url=self.get(git, "url", f"{path}.git"), ref=ref)
        if "pypi" in node:
            pypi = self.get(node, "pypi", path)
            return Source("pypi", name=self.get(pypi, "name", f"{path}.pypi", default_name),
                          version=self.get(pypi, "version", f"{path}.pypi"))
        rel = self.get(node, "path", path)
        real, display = self.local_file(rel, f"{path}.path", directory=True)
        return Source("path", path=real, display=display)

    def patches(self, names, path: str) -> tuple:
        out = []
        patch_root = (self.root / "patches").resolve()
        for i, name in enumerate(names or ()):
            sub = f"{path}[{i}]"
            where = names.at(i) if isinstance(names, YList) else self.where(path)
            self.wheres[sub] = where
            candidate = patch_root / name
            if not candidate.exists():
                raise SpecError(where, sub, f"patch not found: patches/{name}")
            real = candidate.resolve()
            if patch_root not in real.parents or not real.is_file():
                raise SpecError(where, sub, f"patches/{name} must be a regular file inside patches/")
            data = real.read_bytes()
            out.append(PatchRef(name=name, path=real, where=where, data=data,
                                parsed=parse_patch(name, data)))  # loading a patch lints it
        return tuple(out)


def _display(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _pairs(node) -> tuple:
    return tuple((k, str(v)) for k, v in (node or {}).items())


def build_image_spec(root: Path, name: str, chain: tuple, tree: YMap) -> ImageSpec:
    b = _Builder(root, tree)
    system = None
    if "system" in tree:
        node = b.get(tree, "system", "")
        archive = b.get(node, "archive", "system", {}) or {}
        system = System(
            packages=tuple(b.get(node, "packages", "system", ()) or ()),
            archive_url=archive.get("url", DEFAULT_ARCHIVE[0]).rstrip("/"),
            suite=archive.get("suite", DEFAULT_ARCHIVE[1]),
            components=tuple(archive.get("components", DEFAULT_ARCHIVE[2])),
            install=b.get(node, "install", "system", "dpkg"),
            run=tuple(c if isinstance(c, str) else tuple(c) for c in (b.get(node, "run", "system", ()) or ())),
        )
    python = None
    if "python" in tree:
        node = b.get(tree, "python", "")
        python = Python(
            requirements=tuple(b.get(node, "requirements", "python", ()) or ()),
            index=b.get(node, "index", "python", DEFAULT_INDEX).rstrip("/"),
            version=b.get(node, "version", "python", "3.12"),
            pip=b.get(node, "pip", "python", DEFAULT_PIP),
        )
    engine = None
    abstract = bool(tree.get("abstract"))
    if "engine" in tree and not (abstract and "source" not in tree["engine"]):
        node = b.get(tree, "engine", "")
        engine_name = b.get(node, "name", "engine")
        build = None
        if "build" in node:
            bnode = b.get(node, "build", "engine")
            script_path, display = b.local_file(b.get(bnode, "script", "engine.build"), "engine.build.script")
            build = Build(
                script=FileEntry(dest="", src=script_path, display=display, mode=0o755),
                args=b.pairs(b.get(bnode, "args", "engine.build"), "engine.build.args"),
                cache=tuple(b.get(bnode, "cache", "engine.build", ()) or ()),
                secrets=tuple(b.get(bnode, "secrets", "engine.build", ()) or ()),
            )
        installed = b.get(node, "installed", "engine")
        if installed and build:
            raise SpecError(b.where("engine.build"), "engine.build",
                            "an installed (overlay) engine is not built; remove engine.build or engine.installed")
        vendor = []
        for i, vnode in enumerate(b.get(node, "vendor", "engine", ()) or ()):
            path = f"engine.vendor[{i}]"
            vname = b.get(vnode, "name", path)
            vendor.append(Vendor(vname, b.source(b.get(vnode, "source", path), f"{path}.source", vname),
                                 b.get(vnode, "env", path)))
        if vendor and installed:
            raise SpecError(b.where("engine.vendor"), "engine.vendor", "vendored sources are for source builds only")
        if len({v.name for v in vendor}) != len(vendor):
            raise SpecError(b.where("engine.vendor"), "engine.vendor", "two vendored sources have the same name")
        engine = Engine(
            name=engine_name,
            source=b.source(b.get(node, "source", "engine"), "engine.source", engine_name),
            installed=installed,
            dest=b.get(node, "dest", "engine", DEFAULT_SRC_DIR),
            build=build,
            vendor=tuple(vendor),
        )
    patches = b.patches(b.get(tree, "patches", ""), "patches")
    if patches and engine is None:
        raise SpecError(b.where("patches"), "patches", "a patch stack needs an engine to apply to")
    plugins = []
    for i, pnode in enumerate(b.get(tree, "plugins", "", ()) or ()):
        path = f"plugins[{i}]"
        if isinstance(tree["plugins"], YList):
            b.wheres[path] = tree["plugins"].at(i)
        pname = b.get(pnode, "name", path)
        plugins.append(Plugin(
            name=pname,
            source=b.source(b.get(pnode, "source", path), f"{path}.source", pname),
            patches=b.patches(b.get(pnode, "patches", path), f"{path}.patches"),
            files=b.files(b.get(pnode, "files", path), f"{path}.files"),
        ))
    if len({p.name for p in plugins}) != len(plugins):
        raise SpecError(b.where("plugins"), "plugins", "two plugins have the same name")
    entrypoint = b.get(tree, "entrypoint", "")
    cmd = b.get(tree, "cmd", "")
    return ImageSpec(
        name=name,
        file=tree.where.file,
        chain=chain,
        abstract=bool(b.get(tree, "abstract", "", False)),
        description=b.get(tree, "description", "", ""),
        model=Model(**{k: v for k, v in (b.get(tree, "model", "", {}) or {}).items()}),
        platform=b.get(tree, "platform", "", DEFAULT_PLATFORM),
        base=b.get(tree, "base", ""),
        system=system,
        python=python,
        engine=engine,
        patches=patches,
        plugins=tuple(plugins),
        files=b.files(b.get(tree, "files", ""), "files"),
        env=b.pairs(b.get(tree, "env", ""), "env"),
        workdir=b.get(tree, "workdir", ""),
        user=b.get(tree, "user", ""),
        expose=tuple(b.get(tree, "expose", "", ()) or ()),
        entrypoint=tuple(entrypoint) if entrypoint is not None else None,
        cmd=tuple(cmd) if cmd is not None else None,
        labels=b.pairs(b.get(tree, "labels", ""), "labels"),
        wheres=b.wheres,
    )
