"""The image catalogue: finding specs under images/ and resolving `extends:`."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from enginebuild import spec_schema
from enginebuild.errors import SpecError, UserError, Where
from enginebuild.spec import ImageSpec, build_image_spec
from enginebuild.yamlload import YList, YMap, load_yaml_file

SPEC_FILE = "image.yaml"
MAX_EXTENDS_DEPTH = 16


@dataclass(frozen=True)
class Catalog:
    root: Path

    @property
    def images_dir(self) -> Path:
        return self.root / "images"

    def names(self) -> list:
        if not self.images_dir.is_dir():
            return []
        return sorted(p.parent.name for p in self.images_dir.glob(f"*/{SPEC_FILE}")
                      if re.fullmatch(spec_schema.NAME, p.parent.name))

    def spec_path(self, name: str) -> Path:
        return self.images_dir / name / SPEC_FILE

    def display(self, name: str) -> str:
        return f"images/{name}/{SPEC_FILE}"

    def load(self, name: str) -> ImageSpec:
        if not re.fullmatch(spec_schema.NAME, name) or not self.spec_path(name).is_file():
            close = difflib.get_close_matches(name, self.names(), n=1)
            raise UserError(f"no image named {name!r} (looked for {self.display(name)})",
                            hint=f"did you mean {close[0]!r}?" if close else "`python BUILD.py list` shows the images")
        chain, tree = self._merged(name)
        # an abstract image is a shared definition: it need not be complete
        spec_schema.IMAGE.check(tree, "", tree.where, partial=bool(tree.get("abstract")))
        return build_image_spec(self.root, name, tuple(chain), tree)

    def load_all(self) -> list:
        return [self.load(n) for n in self.names()]

    def _raw(self, name: str) -> YMap:
        display = self.display(name)
        tree = load_yaml_file(self.spec_path(name), display)
        if not isinstance(tree, YMap):
            line = tree.where.line if isinstance(tree, YList) else 1
            raise SpecError(Where(display, line), "", "a spec must be a mapping of keys (base:, engine:, ...)")
        spec_schema.IMAGE.check(tree, "", tree.where, partial=True)
        return tree

    def _merged(self, name: str) -> tuple:
        chain = [name]
        trees = [self._raw(name)]
        while "extends" in trees[-1]:
            parent = trees[-1]["extends"]
            where = trees[-1].at("extends")
            if parent in chain:
                cycle = " -> ".join(chain + [parent])
                raise SpecError(where, "extends", f"cycle in extends: {cycle}")
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
            merged = merge_trees(merged, child)
        merged.pop("extends", None)
        if len(trees) > 1:
            # `abstract` describes one file, never what an image inherits
            if "abstract" not in trees[0]:
                merged.pop("abstract", None)
        return chain, merged


def merge_trees(parent, child):
    """Mappings merge key by key (the child wins); lists and scalars are replaced."""
    if not (isinstance(parent, dict) and isinstance(child, dict)):
        return child
    out = YMap()
    out.where = child.where if isinstance(child, YMap) else getattr(parent, "where", None)
    out.key_where = {}
    for key in list(parent) + [k for k in child if k not in parent]:
        if key in child:
            out[key] = merge_trees(parent[key], child[key]) if key in parent else child[key]
            out.key_where[key] = child.at(key) if isinstance(child, YMap) else None
        else:
            out[key] = parent[key]
            out.key_where[key] = parent.at(key) if isinstance(parent, YMap) else None
    return out


__all__ = ["Catalog", "merge_trees", "YList"]
