"""What made the bytes: every layer's and component's key carries a digest of the code that
writes its bytes (as Nix puts the builder in a derivation's hash and Bazel the tool in an action's
key). A layer kind names the modules whose code shapes what it writes (`LayerPayload.writer`: its
own module, the tar writer, the wheel installer, the patch applier...); the digest is of their
code (the syntax tree, without comments, docstrings and import lines), read here, never imported
(the planner loads no writer). So after an upgrade of
enginebuild a layer whose writer changed is written again, and only such a layer: a release that
changes nothing its writers read (the version string among them) keeps every key.
tests/test_writers.py holds each kind's list to the byte-shaping modules its module imports."""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild.core import keys

if TYPE_CHECKING:
    from enginebuild.layerkinds.base import LayerPayload

PACKAGE = Path(__file__).resolve().parents[1]  # the enginebuild package
# what turns a component's build (BuildKit's image) into the outputs stored for it
COMPONENT_WRITER = ("execution/outputs.py", "execution/normalize.py", "io/tars.py")
# what writes a patched source tree into a component's build context
SOURCE_TREE_WRITER = ("patches/patched.py", "patches/check.py", "patches/apply.py", "core/patchfile.py",
                      "core/gitbinary.py", "sources/trees.py", "io/tars.py", "io/unpack.py")


@functools.cache
def code_digest(paths: tuple[str, ...]) -> str:
    """sha256 over each module (a path relative to the package) and its code."""
    digest = hashlib.sha256()
    for path in sorted(set(paths)):
        digest.update(f"{path}\n".encode())
        digest.update(_module_code(path))
        digest.update(b"\n")
    return digest.hexdigest()


def _module_code(path: str) -> bytes:
    """`code_of` a module of the package, parsed once a run while the file is unchanged (the lists of
    several kinds share modules)."""
    found = (PACKAGE / path).stat()
    return _parsed(path, found.st_mtime_ns, found.st_size)


@functools.cache
def _parsed(path: str, mtime_ns: int, size: int) -> bytes:
    return code_of((PACKAGE / path).read_bytes(), path)


def code_of(source: bytes, path: str) -> bytes:
    """What of a module's source shapes what it does: its syntax tree without docstrings and
    import statements (comments and line numbers are not in it). A comment, a docstring or a
    module moved to another package (its import line) changes no key; an imported module that
    shapes bytes is a writer of its own (tests/test_writers.py holds the lists to that)."""
    tree = ast.parse(source, path)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        kept = [s for s in body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        if kept and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and isinstance(kept[0], ast.Expr) and isinstance(kept[0].value, ast.Constant) \
                and isinstance(kept[0].value.value, str):
            kept = kept[1:]
        node.body = kept or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.dump(tree, annotate_fields=False, include_attributes=False).encode()


def module_path(module: str) -> str:
    """`enginebuild.layerkinds.files` -> `layerkinds/files.py`."""
    return module.removeprefix("enginebuild.").replace(".", "/") + ".py"


def writer_paths(kind: type[object]) -> tuple[str, ...]:
    return tuple(sorted({module_path(kind.__module__), *getattr(kind, "writer", ())}))


def writer_digest(kind: type[object]) -> str:
    return code_digest(writer_paths(kind))


def layer_key(payload: LayerPayload, epoch: int) -> str:
    """A layer's key: what its payload says shapes its bytes, and the code that writes them."""
    return keys.key_of("layer", payload=payload.key(epoch), writer=writer_digest(type(payload)))
