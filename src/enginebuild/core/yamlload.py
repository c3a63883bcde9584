"""Strict YAML loading that keeps file:line for every key and value.

Safe loading only; duplicate keys, anchors/aliases, non-standard tags, NUL bytes
and oversized documents are refused with the place they occur.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from enginebuild.errors import SpecError, Where

MAX_BYTES = 1 << 20  # a spec is a page of text; refuse anything that is not
MAX_DEPTH = 32  # real specs nest five levels; deeper is a mistake or an attack on the parser
_SURROGATE = re.compile("[\ud800-\udfff]")


class YMap(dict[str, Any]):
    """A mapping that remembers where it and each of its keys came from."""

    where: Where
    key_where: dict[str, Where]

    def at(self, key: str) -> Where:
        return self.key_where.get(key) or self.where


class YList(list[Any]):
    where: Where
    item_where: list[Where]

    def at(self, index: int) -> Where:
        return self.item_where[index] if index < len(self.item_where) else self.where


def _where(display: str, node: yaml.Node) -> Where:
    return Where(display, node.start_mark.line + 1)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases; composition below handles the rest."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # yaml API
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise SpecError(
                Where(self.name, event.start_mark.line + 1),
                "",
                "YAML aliases (*name) are not allowed in specs",
                hint="use 'extends:' to share definitions",
            )
        event = self.peek_event()  # type: ignore[no-untyped-call]
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise SpecError(
                Where(self.name, event.start_mark.line + 1),
                "",
                f"YAML anchors (&{anchor}) are not allowed in specs",
                hint="use 'extends:' to share definitions",
            )
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise SpecError(Where(self.name, event.start_mark.line + 1), "",
                                f"nested more than {MAX_DEPTH} levels deep; a spec is a few levels of mappings and lists")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


_SCALAR_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}


def _convert(node: yaml.Node, display: str, loader: _StrictLoader) -> Any:  # noqa: C901
    if isinstance(node, yaml.MappingNode):
        if node.tag != "tag:yaml.org,2002:map":
            raise SpecError(_where(display, node), "", f"unsupported YAML tag {node.tag!r}")
        out = YMap()
        out.where = _where(display, node)
        out.key_where = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise SpecError(_where(display, key_node), "", "YAML merge keys (<<) are not allowed")
            key = _convert(key_node, display, loader)
            if not isinstance(key, str):
                raise SpecError(_where(display, key_node), "", f"keys must be strings, got {key!r}",
                                hint="quote the key")
            if key in out:
                first = out.key_where[key]
                raise SpecError(_where(display, key_node), key,
                                f"duplicate key (first defined at line {first.line})")
            out.key_where[key] = _where(display, key_node)
            out[key] = _convert(value_node, display, loader)
        return out
    if isinstance(node, yaml.SequenceNode):
        if node.tag != "tag:yaml.org,2002:seq":
            raise SpecError(_where(display, node), "", f"unsupported YAML tag {node.tag!r}")
        items = YList()
        items.where = _where(display, node)
        items.item_where = []
        for item in node.value:
            items.item_where.append(_where(display, item))
            items.append(_convert(item, display, loader))
        return items
    if node.tag not in _SCALAR_TAGS:
        raise SpecError(_where(display, node), "", f"unsupported YAML tag {node.tag!r}",
                        hint="specs are plain YAML: strings, numbers, booleans, lists and mappings")
    try:
        value = loader.construct_object(node, deep=True)
    except yaml.YAMLError as exc:
        raise SpecError(_where(display, node), "", f"invalid value: {exc}") from None
    if isinstance(value, str) and _SURROGATE.search(value):
        raise SpecError(_where(display, node), "", "the value holds a lone UTF-16 surrogate escape (such as \\ud83d); "
                        "write the character itself, or \\U0001F680 for one outside the BMP")
    return value


def load_yaml_text(text: str, display: str) -> Any:
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise SpecError(Where(display, line), "", "NUL byte in file")
    loader = _StrictLoader(text)
    loader.name = display
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        return _convert(node, display, loader)
    except RecursionError:
        raise SpecError(Where(display), "", f"nested too deeply to read (at most {MAX_DEPTH} levels)") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = mark.line + 1 if mark else None
        problem = exc.problem or str(exc)
        raise SpecError(Where(display, at), "", f"invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise SpecError(Where(display), "", f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()


def load_yaml_file(path: Path, display: str, root: Path | None = None) -> Any:
    """`root`: the recipe repository the file must lie in (default: the file's own folder)."""
    from enginebuild.io.recipefiles import OutsideRecipe, open_recipe_file

    try:
        with open_recipe_file(path, str(root or path.parent)) as handle:
            size = os.fstat(handle.fileno()).st_size
            raw = handle.read(MAX_BYTES + 1)
        if size > MAX_BYTES or len(raw) > MAX_BYTES:
            raise SpecError(Where(display), "", f"file is {max(size, len(raw))} bytes; a spec may be at most {MAX_BYTES}")
    except OutsideRecipe as exc:
        raise SpecError(Where(display), "", exc.message.replace(str(path), "this spec", 1)) from None
    except FileNotFoundError:
        raise SpecError(Where(display), "", "file not found") from None
    except IsADirectoryError:
        raise SpecError(Where(display), "", "is a directory, expected a YAML file") from None
    except OSError as exc:
        raise SpecError(Where(display), "", f"cannot read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError(Where(display, line), "", "not valid UTF-8") from None
    return load_yaml_text(text, display)
