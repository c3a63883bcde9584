"""The image catalogue: finding specs under images/, `extends:`, variants and one-off overrides.

Merging a child over its parent: mappings merge key by key (the child wins); lists and
scalars are replaced; a key set to null removes what the parent gave; choosing another
member of an exclusive group (a `git:` source over an inherited `pypi:` one) replaces the
inherited member instead of clashing with it.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from enginebuild.core.schema import MapOf, OneOf, Record, Schema
from enginebuild.core.yamlload import YList, YMap, load_yaml_file, load_yaml_text
from enginebuild.errors import SpecError, UserError, Where, command
from enginebuild.io.recipefiles import set_recipe_root
from enginebuild.recipe import fields
from enginebuild.recipe.imagereader import read_image
from enginebuild.recipe.model import ImageSpec

SPEC_FILE = "image.yaml"
MAX_EXTENDS_DEPTH = 16


def _sub(schema: Schema | None, key: str) -> Schema | None:
    if isinstance(schema, Record):
        return schema.fields.get(key)
    if isinstance(schema, MapOf):
        return schema.value
    if isinstance(schema, OneOf):
        return next((_sub(o, key) for o in schema.options if isinstance(o, (Record, MapOf))), None)
    return None


def merge_trees(parent: Any, child: Any, schema: Schema | None = None) -> Any:
    if not (isinstance(parent, dict) and isinstance(child, dict)):
        return child
    groups = schema.exclusive if isinstance(schema, Record) else ()
    dropped: set[str] = set()
    for group in groups:
        if any(child.get(k) is not None for k in group):
            dropped |= {k for k in group if k not in child}
    out = YMap()
    out.where = child.where if isinstance(child, YMap) else getattr(parent, "where", None)  # type: ignore[assignment]
    out.key_where = {}
    for key in list(parent) + [k for k in child if k not in parent]:
        if key in dropped:
            continue
        if key in child:
            if child[key] is None:  # null: remove what the parent gave (kept as null to the end, where
                out[key] = None  # _strip_nulls drops it: a label still null there is the base's to remove)
                out.key_where[key] = child.at(key) if isinstance(child, YMap) else out.where
                continue
            out[key] = merge_trees(parent[key], child[key], _sub(schema, key)) if key in parent else child[key]
            out.key_where[key] = child.at(key) if isinstance(child, YMap) else out.where
        else:
            out[key] = parent[key]
            out.key_where[key] = parent.at(key) if isinstance(parent, YMap) else out.where
    return out


def _strip_nulls(tree: object) -> None:
    """Nulls left after merging (removing something no parent had) mean nothing: removed in place."""
    if isinstance(tree, YMap):
        for key in [k for k, v in tree.items() if v is None]:
            del tree[key]
        for value in tree.values():
            _strip_nulls(value)
    elif isinstance(tree, list):
        for value in tree:
            _strip_nulls(value)


def split_name(name: str) -> tuple[str, str | None]:
    image, sep, variant = name.partition(":")
    return image, (variant if sep else None)


@dataclass(frozen=True)
class Catalog:
    root: Path

    def __post_init__(self) -> None:
        set_recipe_root(self.root)  # every recipe file is read inside this root (io/recipefiles.py)

    @property
    def images_dir(self) -> Path:
        return self.root / "images"

    def names(self) -> list[str]:
        if not self.images_dir.is_dir():
            return []
        return sorted(p.parent.name for p in self.images_dir.glob(f"*/{SPEC_FILE}")
                      if re.fullmatch(fields.NAME, p.parent.name))

    def spec_path(self, name: str) -> Path:
        return self.images_dir / name / SPEC_FILE

    def display(self, name: str) -> str:
        return f"images/{name}/{SPEC_FILE}"

    def _no_such(self, name: str) -> UserError:
        close = difflib.get_close_matches(name, self.names(), n=1)
        return UserError(f"no image named {name!r} (looked for {self.display(name)})",
                         hint=f"did you mean {close[0]!r}?" if close else f"`{command()} list` shows the images")

    def load(self, name: str, overrides: tuple[str, ...] = ()) -> ImageSpec:
        image, variant = split_name(name)
        if not re.fullmatch(fields.NAME, image) or not self.spec_path(image).is_file():
            raise self._no_such(image)
        chain, tree = self._merged(image)
        variants = tuple(sorted((tree.get("variants") or {}).keys()))
        variant_tree = None
        if variant is not None:
            if variant not in variants:
                close = difflib.get_close_matches(variant, variants, n=1)
                raise UserError(f"{self.display(image)}: {image} has no variant {variant!r} "
                                f"(it has: {', '.join(variants) or 'none'})",
                                hint=f"did you mean {image}:{close[0]}?" if close else None)
            variant_tree = tree["variants"][variant]
        tree.pop("variants", None)
        if variant_tree is not None:
            tree = merge_trees(tree, variant_tree, fields.image())
        for override in overrides:
            _dotted_key(tree, override)
            tree = merge_trees(tree, parse_override(override), fields.image())
        labels = tree.get("labels")  # a label still null after merging is one the base image has
        removed = tuple(sorted(k for k, v in labels.items() if v is None)) if isinstance(labels, dict) else ()
        _strip_nulls(tree)
        try:
            fields.image().check(tree, "", tree.where, partial=bool(tree.get("abstract")))
        except SpecError as exc:
            raise _new_dotted_key(exc, overrides) or exc from None
        spec = read_image(self.root, name, tuple(chain), tree, variants)
        return dataclasses.replace(spec, labels_removed=removed) if removed else spec

    def _raw(self, name: str) -> YMap:
        display = self.display(name)
        tree = load_yaml_file(self.spec_path(name), display, self.root)
        if not isinstance(tree, YMap):
            line = tree.where.line if isinstance(tree, YList) else 1
            raise SpecError(Where(display, line), "", "a spec must be a mapping of keys (base:, components:, ...)")
        fields.image().check(tree, "", tree.where, partial=True)
        return tree

    def _merged(self, name: str) -> tuple[list[str], YMap]:
        chain = [name]
        trees = [self._raw(name)]
        while trees[-1].get("extends"):
            parent = trees[-1]["extends"]
            where = trees[-1].at("extends")
            if parent in chain:
                raise SpecError(where, "extends", f"cycle in extends: {' -> '.join(chain + [parent])}")
            if len(chain) >= MAX_EXTENDS_DEPTH:
                raise SpecError(where, "extends", f"extends chain deeper than {MAX_EXTENDS_DEPTH}")
            if not self.spec_path(parent).is_file():
                close = difflib.get_close_matches(parent, self.names(), n=1)
                raise SpecError(where, "extends", f"no image named {parent!r} to extend",
                                hint=f"did you mean {close[0]!r}?" if close else None)
            chain.append(parent)
            trees.append(self._raw(parent))
        merged = trees[-1]
        for child in reversed(trees[:-1]):
            merged = merge_trees(merged, child, fields.image())
        merged.pop("extends", None)
        if len(trees) > 1 and "abstract" not in trees[0]:
            merged.pop("abstract", None)  # `abstract` describes one file, never what an image inherits
        return chain, merged


_KEY = re.compile(r"\[([^\]]+)\]|([^.\[\]]+)")


def _dotted_key(tree: object, text: str) -> None:
    """Refuse `--set components.llama.cpp.x=…` where the spec has a key `llama.cpp`, naming the
    bracketed form, rather than report an unknown key `llama`."""
    path = text.partition("=")[0]
    keys = [m.group(1) or m.group(2) for m in _KEY.finditer(path)]
    node: object = tree
    done: list[str] = []
    for i, key in enumerate(keys):
        if not isinstance(node, dict):
            return
        if key not in node:
            for j in range(len(keys), i + 1, -1):
                joined = ".".join(keys[i:j])
                if joined in node:
                    fixed = "".join(f"[{k}]" if "." in k else f".{k}" for k in [*done, joined, *keys[j:]]).lstrip(".")
                    raise UserError(f"--set {path}: {'.'.join(done) or 'the spec'} has no key {key!r}, but has "
                                    f"{joined!r}: a key with dots is written in brackets", hint=f"--set {fixed}=…")
            if done[-1:] in (["components"], ["overlays"]) and i < len(keys) - 1:  # a field of an entry it lacks
                close = difflib.get_close_matches(key, [str(k) for k in node], n=1)
                raise UserError(f"--set {path}: the spec has no {done[-1][:-1]} {key!r} (it has: "
                                f"{', '.join(sorted(str(k) for k in node))})",
                                hint=f"did you mean --set {'.'.join([*done, close[0], *keys[i + 1:]])}=…?" if close
                                else f"a new {done[-1][:-1]} is given whole: --set '{'.'.join([*done, key])}={{...}}'")
            return
        node, done = node[key], [*done, key]


def _new_dotted_key(exc: SpecError, overrides: tuple[str, ...]) -> UserError | None:
    """`--set labels.org.example.x=1` made `labels.org` a mapping where a value goes: the key was
    meant whole, dots and all; say how to write it (brackets)."""
    if "got a mapping" not in exc.message:
        return None
    for text in overrides:
        path = text.partition("=")[0]
        keys = [m.group(1) or m.group(2) for m in _KEY.finditer(path)]
        for cut in range(1, len(keys)):
            if ".".join(keys[:cut + 1]) == exc.key:
                fixed = ".".join(keys[:cut]) + "[" + ".".join(keys[cut:]) + "]"
                return UserError(f"--set {path}: {'.'.join(keys[:cut])} takes a value at each key, and "
                                 f"{'.'.join(keys[cut:])!r} is one key with dots: it is written in brackets",
                                 hint=f"--set '{fixed}=…'")
    return None


def parse_override(text: str) -> YMap:
    """`--set KEY.PATH=VALUE` as a partial tree; VALUE is YAML; `[a.b]` quotes a key with dots."""
    path, sep, value_text = text.partition("=")
    if not sep or not path:
        raise UserError(f"--set {text!r}: expected KEY.PATH=VALUE, such as components.vllm.source.pypi.version=0.22.0")
    keys = [m.group(1) or m.group(2) for m in _KEY.finditer(path)]
    index = next((m.group(1) for m in _KEY.finditer(path) if m.group(1) and m.group(1).isdigit()), None)
    if index is not None:  # [0] after a list: --set replaces values, it does not reach into lists
        listed = path[:path.index(f"[{index}]")]
        raise UserError(f"--set {path}: {listed}[{index}] names an item of a list, and --set does not reach into "
                        f"lists: it replaces a value whole",
                        hint=f"give the whole list: --set '{listed}=[...]' (YAML), or edit the spec")
    display = f"--set {path}"
    value = load_yaml_text(value_text, display) if value_text.strip() else ""
    if not keys:
        raise UserError(f"--set {text!r}: no key path")
    node: object = value
    for key in reversed(keys):
        wrapper = YMap()
        wrapper.where, wrapper.key_where = Where(display), {key: Where(display)}
        wrapper[key] = node
        node = wrapper
    assert isinstance(node, YMap)
    return node
