"""The tool's identity in every key (plan/writers.py): a layer's key carries a digest of the code
that writes its bytes, so a changed writer writes again exactly the layers of the kinds it writes,
and a release that changes nothing a writer reads (its version string among them) keeps every key.
Each kind's list of writer modules is held to the byte-shaping modules its module imports."""
import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, need
from enginebuild.layerkinds import KINDS
from enginebuild.lock.lockfile import read_lock
from enginebuild.plan import writers
from enginebuild.plan.image import Options, plan_image
from enginebuild.recipe.catalog import Catalog

PACKAGE = ROOT / "src" / "enginebuild"
# the modules whose code decides the bytes of a layer or a component's outputs
BYTE_SHAPING = {f"layerkinds/{p.name}" for p in (PACKAGE / "layerkinds").glob("*.py")
                if p.name not in ("__init__.py", "base.py", "context.py")} | {
    "io/tars.py", "io/unpack.py", "patches/apply.py", "patches/check.py", "patches/patched.py",
    "core/patchfile.py", "core/gitbinary.py", "sources/trees.py", "execution/normalize.py", "execution/outputs.py"}


def imported(path: str) -> set[str]:
    """The enginebuild modules a module imports (anywhere in it), as package-relative paths."""
    found = set()
    for node in ast.walk(ast.parse((PACKAGE / path).read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("enginebuild."):
            module = node.module
            candidates = [writers.module_path(module)] + [writers.module_path(f"{module}.{a.name}") for a in node.names]
            found |= {c for c in candidates if (PACKAGE / c).exists()}
    return found


def closure(path: str) -> set[str]:
    seen, todo = set(), [path]
    while todo:
        current = todo.pop()
        for module in imported(current):
            if module in BYTE_SHAPING and module not in seen:
                seen.add(module)
                todo.append(module)
    return seen


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_each_kind_names_every_byte_shaping_module_its_writer_imports(kind):
    named = set(writers.writer_paths(kind))
    own = writers.module_path(kind.__module__)
    missing = closure(own) - named
    assert not missing, f"{kind.__name__}.writer lacks {sorted(missing)} (its module imports them)"
    assert all((PACKAGE / p).exists() for p in named)


def test_the_component_and_source_tree_writers_are_whole():
    for listed in (writers.COMPONENT_WRITER, writers.SOURCE_TREE_WRITER):
        reached = set().union(*(closure(p) for p in listed))
        assert reached <= set(listed), sorted(reached - set(listed))


def plan_keys(workspace) -> dict:
    spec = Catalog(workspace).load("demo")
    plan = plan_image(spec, read_lock(workspace, spec), spec.platforms[0], Options())
    out = {f"component {c.name}": c.key for c in plan.components}
    out.update({f"{layer.kind}: {layer.name}": layer.key for layer in plan.runtime.layers})
    return out


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of enginebuild's package that the planner reads its writers' code from."""
    copy = tmp_path / "enginebuild"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(writers, "PACKAGE", copy)
    writers.code_digest.cache_clear()
    yield copy
    writers.code_digest.cache_clear()


def test_a_changed_writer_moves_the_keys_of_the_layers_it_writes_and_no_other(workspace, package_copy):
    before = plan_keys(workspace)
    tars = package_copy / "layerkinds/filelayer.py"
    # a comment, a docstring or an import line moves nothing: not code that writes bytes
    text = tars.read_text()
    tars.write_text(text.replace('"""', '"""A docstring edited. ', 1).replace("\nfrom ", "\n# a comment\nfrom ", 1)
                    + "\nimport json\n# a change to how recipe files are written, in words\n")
    writers.code_digest.cache_clear()
    assert plan_keys(workspace) == before
    tars.write_text(text + "\nFILE_MODE_DEFAULT = 0o644\n")
    writers.code_digest.cache_clear()
    after = plan_keys(workspace)
    moved = sorted(name for name in after if after[name] != before[name])
    assert moved and all(name.startswith("files: ") for name in moved), moved  # files come after the bytecode
    assert len(moved) == sum(1 for name in before if name.startswith("files: "))

    installer = package_copy / "layerkinds/installer.py"
    installer.write_text(installer.read_text() + "\nRECORD_NAME = 'RECORD'\n")
    writers.code_digest.cache_clear()
    again = plan_keys(workspace)
    moved = sorted(name for name in again if again[name] != after[name])
    layers = {name.split(":")[0] for name in moved if not name.startswith("component ")}
    # what the installer writes, and the bytecode of the layers below (derived from them): nothing else
    assert layers == {"wheel", "output", "bytecode"}, moved
    # a component moves as its builder does (cuda-kernels builds on an environment with installed wheels)


def test_a_new_version_string_alone_moves_no_key(workspace, package_copy):
    before = plan_keys(workspace)
    init = package_copy / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9'))
    writers.code_digest.cache_clear()
    assert plan_keys(workspace) == before


@pytest.mark.docker
def test_image_after_a_writer_changed_writes_that_layer_again_and_nothing_else(workspace, tmp_path, docker_engine,
                                                                               debian_reachable, pypi_reachable):
    """The next `image` with an enginebuild whose file writer adds an entry: the files layers are
    written again (and hold it), nothing else is built; with only a new version string: nothing."""
    need(shutil.which("docker") is not None, "docker is not installed")
    platform = ["--platform", "linux/amd64"]

    def image(source: Path, *extra):
        env = {**os.environ, "PYTHONPATH": str(source)}
        return subprocess.run([sys.executable, "-m", "enginebuild", "image", "demo", *platform, *extra],
                              cwd=workspace, env=env, capture_output=True, text=True, timeout=1800)

    first = image(ROOT / "src")
    assert first.returncode == 0, first.stderr
    changed = tmp_path / "changed"
    shutil.copytree(ROOT / "src", changed, ignore=shutil.ignore_patterns("__pycache__"))
    filelayer = changed / "enginebuild/layerkinds/filelayer.py"
    text = filelayer.read_text()
    assert "def write_files(writer" in text
    filelayer.write_text(text.replace("def write_files(writer: TarWriter, items", "def _write_files(writer: TarWriter, items")
                         + "\n\ndef write_files(writer: TarWriter, items: Iterable[FileItem]) -> None:\n"
                           "    _write_files(writer, items)\n"
                           "    writer.add_bytes('/opt/enginebuild/writer-mark', b'x', 0o644)\n")
    proc = image(changed)
    assert proc.returncode == 0, proc.stderr
    done = proc.stdout.split(" in ")[0]
    assert "wrote" in done and "built" not in done and "component" not in done, proc.stdout
    ran = subprocess.run(["docker", "run", "--rm", "--entrypoint", "/bin/cat", "enginebuild/demo:latest",
                          "/opt/enginebuild/writer-mark"], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout == "x", ran.stderr

    versioned = tmp_path / "versioned"
    shutil.copytree(changed, versioned)
    init = versioned / "enginebuild/__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9'))
    proc = image(versioned)
    assert proc.returncode == 0, proc.stderr
    assert "nothing to build" in proc.stdout, proc.stdout
