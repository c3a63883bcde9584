"""Strict YAML loading that keeps file:line for every key and value.

Safe loading only; duplicate keys, non-standard tags, NUL bytes, oversized documents and
documents whose aliases expand past MAX_VALUES are refused with the place they occur. Anchors,
aliases and merge keys (`<<: *base`) are taken as YAML defines them.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from enginebuild.errors import SpecError, Where
from enginebuild.io.recipefiles import OutsideRecipe, open_recipe_file

MAX_BYTES = 1 << 20  # a spec is a page of text; refuse anything that is not
MAX_DEPTH = 32  # real specs nest five levels; deeper is a mistake or an attack on the parser
MAX_VALUES = 100_000  # keys, values and items after aliases expand; a real spec has a few hundred
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


class _Strict(Composer, SafeConstructor, Resolver):
    """Safe loading, composed here (in Python) with a bound on depth; anchors and aliases are taken
    (recipes repeat a base or a list of flags), and what they expand to is bounded in _convert
    (MAX_VALUES). The events come from libyaml where PyYAML has it (five times the pure-Python
    scanner's speed), else from PyYAML's own scanner and parser."""

    depth = 0
    values = 0
    name: str

    def __init__(self, stream: str) -> None:  # a loader over its parser's events
        raise NotImplementedError

    def dispose(self) -> None:  # the parser's
        raise NotImplementedError

    def _start(self) -> None:
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def compose_node(self, parent: Any, index: Any) -> Any:  # yaml API
        event = self.peek_event()  # type: ignore[attr-defined]
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise SpecError(Where(self.name, event.start_mark.line + 1), "",
                                f"nested more than {MAX_DEPTH} levels deep; a spec is a few levels of mappings and lists")
            return Composer.compose_node(self, parent, index)
        finally:
            self.depth -= 1


class _PythonLoader(_Strict, Reader, Scanner, Parser):
    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        self._start()

    def dispose(self) -> None:
        Parser.dispose(self)


_LOADERS: list[type[_Strict]] = [_PythonLoader]
try:
    from yaml.cyaml import CParser  # type: ignore[attr-defined]

    class _LibyamlLoader(_Strict, CParser):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            self._start()

        def dispose(self) -> None:
            CParser.dispose(self)

    _LOADERS.insert(0, _LibyamlLoader)
except ImportError:  # a PyYAML built without libyaml
    pass


_SCALAR_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}


def _convert(node: yaml.Node, display: str, loader: _Strict) -> Any:  # noqa: C901
    loader.values += 1
    if loader.values > MAX_VALUES:  # aliases of aliases expand exponentially: the bound stops them
        raise SpecError(_where(display, node), "", f"the document expands to more than {MAX_VALUES} values "
                                                   "(YAML aliases repeating aliases)")
    if isinstance(node, yaml.MappingNode):
        if node.tag != "tag:yaml.org,2002:map":
            raise SpecError(_where(display, node), "", f"unsupported YAML tag {node.tag!r}")
        out = YMap()
        out.where = _where(display, node)
        out.key_where = {}
        merged: dict[str, tuple[Any, Where]] = {}  # `<<: *anchor` keys: the mapping's own keys win
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    value = _convert(source, display, loader)
                    if not isinstance(value, YMap):
                        raise SpecError(_where(display, key_node), "", "a YAML merge (<<) takes a mapping or a "
                                                                       "list of mappings")
                    for k, v in value.items():
                        merged.setdefault(k, (v, value.at(k)))
                continue
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
        for key, (value, where) in merged.items():
            if key not in out:
                out[key], out.key_where[key] = value, where
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
    try:
        try:
            return _compose(_LOADERS[0], text, display)
        except yaml.YAMLError:
            if len(_LOADERS) == 1:
                raise
            # what is wrong, said as PyYAML's own scanner says it (a lone surrogate escape is named
            # as such, where libyaml says "invalid Unicode character escape code")
            return _compose(_LOADERS[-1], text, display)
    except RecursionError:
        raise SpecError(Where(display), "", f"nested too deeply to read (at most {MAX_DEPTH} levels)") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = mark.line + 1 if mark else None
        problem = exc.problem or str(exc)
        raise SpecError(Where(display, at), "", f"invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise SpecError(Where(display), "", f"invalid YAML: {exc}") from None


def _compose(kind: type[_Strict], text: str, display: str) -> Any:
    loader = kind(text)
    loader.name = display
    try:
        node = loader.get_single_node()
        return None if node is None else _convert(node, display, loader)
    finally:
        loader.dispose()


def load_yaml_file(path: Path, display: str, root: Path | None = None) -> Any:
    """`root`: the recipe repository the file must lie in (default: the file's own folder)."""

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
