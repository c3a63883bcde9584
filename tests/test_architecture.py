"""docs/architecture.md's package table is the code's import graph: every import of a package or
top-level module (module level or inside a function) is listed there, every listed one is
made, each has an import contract, and no package imports one that imports it back."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

from conftest import ROOT

SRC = ROOT / "src/enginebuild"
BOTTOM = {"errors", "settings", "wire"}
TOP = {p.stem for p in SRC.glob("*.py")} - BOTTOM - {"__init__", "__main__"}  # workspace, cli, doctor, ...
PACKAGES = ({p.name for p in SRC.iterdir() if p.is_dir() and any(p.glob("*.py"))} - {"commands"}) | TOP
KNOWN_CYCLES: set = set()  # none: core/ (schema, YAML, patch format, CUDA tables) is below recipe/


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A source file's syntax tree (parsed once for all the tests of this file)."""
    return ast.parse(path.read_text())


@functools.cache
def walked(path: Path) -> tuple[ast.AST, ...]:
    """Every node of a source file's syntax tree."""
    return tuple(ast.walk(parsed(path)))


def imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {p: set() for p in PACKAGES}
    for path in SRC.rglob("*.py"):
        owner = path.relative_to(SRC).parts[0].removesuffix(".py")
        if owner not in PACKAGES:
            continue
        for node in walked(path):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module == "enginebuild":  # from enginebuild import fastedit
                names = [f"enginebuild.{a.name}" for a in node.names if a.name != "__version__"]
            for name in names:
                parts = name.split(".")
                if parts[0] == "enginebuild" and len(parts) > 1 and parts[1] != owner:
                    graph[owner].add(parts[1])
    return graph


def documented() -> dict[str, set[str]]:
    text = (ROOT / "docs/architecture.md").read_text()
    text = text[text.index("## Packages"):]
    text = text[:text.index("\n## ", 3)]
    out = {}
    for row in re.findall(r"^\| `(\w+)(?:/|\.py)` \| .* \| (.*) \|$", text, re.M):
        out[row[0]] = set(re.findall(r"`(\w+)`", row[1]))
    return out


def test_the_package_table_lists_exactly_the_imports_each_package_makes():
    graph, table = imports(), documented()
    assert set(table) - {"commands"} == PACKAGES
    for package in sorted(PACKAGES):
        made = graph[package] - BOTTOM
        assert made == table[package], (f"{package}/: the code imports {sorted(made)}, "
                                        f"docs/architecture.md lists {sorted(table[package])}")


def test_no_package_imports_one_that_imports_it_back():
    graph = imports()
    pairs = {frozenset({a, b}) for a in graph for b in graph[a] if b in graph and a in graph[b]}
    assert pairs == KNOWN_CYCLES, sorted(map(sorted, pairs))
    for bottom in BOTTOM:
        uses = {n.module for n in walked(SRC / f"{bottom}.py")
                if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("enginebuild")}
        assert uses <= {f"enginebuild.{b}" for b in BOTTOM}, (bottom, uses)


def module_imports(within_functions: bool = False) -> dict[str, set[str]]:
    """Each module's imports made when it is imported (top-level statements), and with
    `within_functions` those its functions make when they run too."""
    graph: dict[str, set[str]] = {}
    modules = {".".join(p.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__"): p
               for p in SRC.rglob("*.py")}
    for name, path in modules.items():
        graph[name] = set()
        for node in walked(path) if within_functions else parsed(path).body:
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


@pytest.mark.parametrize("within_functions", [False, True], ids=["when loaded", "when its functions run"])
def test_no_module_imports_itself_through_others(within_functions):
    graph = module_imports(within_functions)
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            assert state.get(target) != 1, "import cycle: " + " -> ".join(path[path.index(target):] + [target]) \
                if target in path else f"import cycle through {target}"
            if target not in state:
                visit(target, path + [target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_no_signature_or_dataclass_field_takes_an_untyped_dict():
    """Domain functions take dataclasses: a bare dict[str, Any] may appear in no signature and in
    no class attribute; a document crossing a boundary is named a JsonDoc (enginebuild/wire.py),
    values handed to a template TemplateValues (plan/render.py)."""
    found = []
    for path in SRC.rglob("*.py"):
        for node in walked(path):
            annotations = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                annotations += [a.annotation for a in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                                                       *filter(None, [args.vararg, args.kwarg])] if a.annotation]
                annotations += [node.returns] if node.returns else []
            elif isinstance(node, ast.ClassDef):
                annotations += [n.annotation for n in node.body if isinstance(n, ast.AnnAssign)]
            for annotation in annotations:
                if "dict[str, Any]" in ast.unparse(annotation):
                    found.append(f"{path.relative_to(SRC)}:{annotation.lineno}")
    assert found == []


def contracts() -> dict[str, set[str]]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    out = {}
    for contract in config["contracts"]:
        assert contract["type"] == "forbidden" and len(contract["source_modules"]) == 1
        source = contract["source_modules"][0].removeprefix("enginebuild.")
        out[source] = {m.removeprefix("enginebuild.") for m in contract["forbidden_modules"]}
    return out


def test_the_import_contracts_are_the_package_table():
    """pyproject.toml's import-linter contracts forbid each package exactly what the table does
    not list for it (every other package and top-level module but the bottom)."""
    table = documented()
    modules = PACKAGES | {"commands"} | BOTTOM
    expected = {pkg: modules - BOTTOM - table[pkg] - {pkg} for pkg in PACKAGES}
    assert contracts() == expected


def test_import_linter_keeps_every_contract():
    import os
    import shutil
    import subprocess

    tool = shutil.which("lint-imports")
    assert tool, "lint-imports (import-linter, requirements.txt) is not installed"
    proc = subprocess.run([tool, "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(SRC.parent)})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert f"Contracts: {len(PACKAGES)} kept, 0 broken." in proc.stdout


def test_use_cases_return_what_they_did_and_only_verbs_print():
    """A use case (usecases/) returns a typed result or hands one to the verb's callback; stdout is
    the verb's (commands/): no `print` and no write to sys.stdout below it."""
    found = []
    for path in (SRC / "usecases").rglob("*.py"):
        for node in walked(path):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr == "stdout" and ast.unparse(node.value) == "sys":
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert found == []


def test_only_layer_kind_modules_ask_which_kind_a_layer_is():
    """A layer kind answers for itself (layerkinds/base.py): no other module tests a payload's class."""
    from enginebuild.layerkinds import KINDS

    names = {kind.__name__ for kind in KINDS} | {"LayerPayload"}
    found = []
    for path in SRC.rglob("*.py"):
        if path.relative_to(SRC).parts[0] == "layerkinds":
            continue
        for node in walked(path):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                    and len(node.args) == 2:
                classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                found += [f"{path.relative_to(SRC)}:{node.lineno} {c.id}" for c in classes
                          if isinstance(c, ast.Name) and c.id in names]
    assert found == []


def test_the_no_op_path_loads_only_the_decision_the_memo_the_probe_and_the_settings():
    """`image NAME` with nothing changed is answered by fastpath.py before the CLI loads: importing it
    must not pull in the rest of enginebuild (measured: 101 modules, 0.1 s, for the whole no-op)."""
    import json
    import subprocess
    import sys

    probe = ("import sys; from enginebuild.fastpath import answer; "
             "print(sorted(m for m in sys.modules if m.startswith('enginebuild')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SRC.parent), "PATH": "/usr/bin:/bin"}).stdout
    assert json.loads(out.replace("'", '"')) == ["enginebuild", "enginebuild.fastpath", "enginebuild.oci", "enginebuild.oci.probe",
                         "enginebuild.settings", "enginebuild.state", "enginebuild.state.decision",
                                                 "enginebuild.state.memo", "enginebuild.wire"]


def test_the_planner_loads_no_writer_and_at_most_43_modules():
    """plan/image.py and what it imports describe layers; the code that writes them (the tar
    writer, the wheel installer, the patch applier, the store, the engine, registries) loads only
    when a layer is written (was 75 modules with every writer; 40 before the bytecode kind, 41 before
    the platform type, 42 before the image config's settings table)."""
    import json
    import subprocess
    import sys

    probe = ("import sys; import enginebuild.plan.image; "
             "print(sorted(m for m in sys.modules if m.startswith('enginebuild')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SRC.parent), "PATH": "/usr/bin:/bin"}).stdout
    loaded = json.loads(out.replace("'", '"'))
    writers = [m for m in loaded if m.removeprefix("enginebuild.").startswith((
        "io.tars", "io.store", "io.http", "io.unpack", "oci", "patches", "execution", "layerkinds.installer",
        "layerkinds.debfile", "layerkinds.filelayer", "layerkinds.basefiles", "sources.trees", "lock.python"))]
    assert writers == []
    assert len(loaded) <= 43, loaded


def test_no_verb_imports_another():
    """A verb's options that others share live in commands/arguments.py; no verb reaches into another's module."""
    found = []
    for path in sorted((SRC / "commands").glob("*.py")):
        for node in walked(path):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("enginebuild.commands.") \
                    and node.module != "enginebuild.commands.arguments":
                found.append(f"{path.name}:{node.lineno} {node.module}")
    assert found == []


def test_the_lock_is_read_through_its_types_outside_lock():
    """Outside lock/, a pin is read as its type (Lock.tool, Lock.source_pin, plan's typed Pins), never
    as the lock's raw JSON."""
    found = [f"{path.relative_to(SRC)}:{n}" for path in SRC.rglob("*.py") if "lock" not in path.relative_to(SRC).parts
             for n, line in enumerate(path.read_text().splitlines(), 1) if "lock.raw(" in line]
    assert found == []


def test_every_module_the_map_names_exists():
    """docs/architecture.md names modules (`plan/writers.py`, `fastpath.py`): each is one of the code's
    (a module moved or renamed is named where the map still says the old place)."""
    import re

    text = (ROOT / "docs/architecture.md").read_text()
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", text))
    assert len(named) >= 40, sorted(named)  # the map names the modules it describes
    missing = sorted(m for m in named if not (SRC / m).exists() and not list(SRC.rglob(m)) and not (ROOT / m).exists())
    assert missing == [], f"docs/architecture.md names modules the code does not have: {missing}"


# where docs/architecture.md ("Imports") lets an import sit inside a function, and why
LOCAL_IMPORTS_ALLOWED = {
    "cli.py": "start-up: every verb's arguments are loaded to parse the command line",
    "commands/": "start-up: a verb imports its own work when it runs",
    "fastpath.py": "the no-op answer, before the CLI loads",
    "fastedit.py": "the file-edit answer, before the CLI loads",
    "state/memo.py": "the no-op path: the atomic writer only to store",
    "workspace.py": "loaded by every verb",
    "io/http.py": "requests on the first request",
    "lock/python.py": "uv may be missing",
    "layerkinds/": "a kind's writer inside `write`: the planner loads no writer",
    "sources/base.py": "in the planner's closure: the store and HTTP only when a source is fetched",
    "recipe/model.py": "in the planner's closure: the patch checks' reader (and its YAML loader) only when asked",
    "lock/lockfile.py": "in the planner's closure: the atomic writer only when a lock is written",
    "serving/nodeside.py": "runs inside the image: torch only where the image has it",
    "plan/templates/": "programs run inside a build, not enginebuild's modules",
}


def test_an_import_sits_inside_a_function_only_where_the_imports_rule_says():
    """Everything imports at its top except where docs/architecture.md's "Imports" says
    otherwise (LOCAL_IMPORTS_ALLOWED, each with its reason): so the import graph the contracts
    check is the whole graph."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        if any(rel == allowed or allowed.endswith("/") and rel.startswith(allowed) for allowed in LOCAL_IMPORTS_ALLOWED):
            continue
        for function in walked(path):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [f"{rel}:{node.lineno}" for node in ast.walk(function)
                          if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert found == []
    documented = (SRC.parents[1] / "docs/architecture.md").read_text()
    assert [name for name in LOCAL_IMPORTS_ALLOWED if f"`{name}" not in documented] == []


def _modules_imported(path: Path) -> set[str]:
    """The enginebuild modules a module imports (at module level, inside functions or for type
    checking alone): `from enginebuild.pkg import mod` names the module mod, not the package."""
    found = set()
    for node in walked(path):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("enginebuild.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("enginebuild"):
            for alias in node.names:
                module = f"{node.module}.{alias.name}"
                place = SRC.parent / Path(*module.split("."))
                found.add(module if place.with_suffix(".py").is_file() or (place / "__init__.py").is_file()
                          else str(node.module))
    return found


def test_the_review_figures_hold():
    """What a review of the code measures, held: no module over 500 lines, no package over 3,500,
    no module importing more than 20 of enginebuild's, `Any` on at most 60 lines (JSON documents
    are `JsonDoc`, values only passed on or narrowed are `object`)."""
    modules = sorted(SRC.rglob("*.py"))
    lines = {p: len(p.read_text().splitlines()) for p in modules}
    assert [str(p.relative_to(SRC)) for p in modules if lines[p] > 500] == []
    packages: dict[str, int] = {}
    for path in modules:
        if len(path.relative_to(SRC).parts) > 1:
            packages[path.relative_to(SRC).parts[0]] = packages.get(path.relative_to(SRC).parts[0], 0) + lines[path]
    assert {name: n for name, n in packages.items() if n > 3500} == {}
    fan_out = {str(p.relative_to(SRC)): len(_modules_imported(p)) for p in modules}
    assert {name: n for name, n in fan_out.items() if n > 20} == {}
    untyped = [f"{p.relative_to(SRC)}:{i}" for p in modules for i, text in enumerate(p.read_text().splitlines(), 1)
               if re.search(r"\bAny\b", text) and not re.match(r"\s*(from typing import|import typing)", text)]
    assert len(untyped) <= 60, untyped
