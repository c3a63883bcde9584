"""A small declarative schema for located YAML trees.

Each schema node validates a value in place and says exactly where it is wrong:
file:line, the key path and what was expected. Unknown keys get a "did you mean".
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from enginebuild.errors import SpecError, Where
from enginebuild.yamlload import YList, YMap


def describe(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"string {shown!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


_BOOL_WORDS = {"yes", "no", "on", "off", "y", "n", "true", "false"}


def _quote_hint(value: Any) -> str | None:
    if isinstance(value, bool):
        return "YAML reads yes/no/on/off/true/false as booleans; quote the value to mean a string"
    if isinstance(value, float):
        return "YAML reads this as a number and may drop digits (12.10 -> 12.1); quote it"
    return None


class Schema:
    expected = "a value"

    def check(self, value: Any, path: str, where: Where, partial: bool) -> None:
        raise NotImplementedError


@dataclass
class Str(Schema):
    pattern: str | None = None
    what: str = "a string"
    allow_int: bool = False
    test: Callable[[str], str | None] | None = None  # returns an error message or None

    @property
    def expected(self) -> str:
        return self.what

    def check(self, value, path, where, partial):
        if self.allow_int and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise SpecError(where, path, f"expected {self.what}, got {describe(value)}", hint=_quote_hint(value))
        if "\x00" in value:
            raise SpecError(where, path, "NUL byte in value")
        if self.pattern and not re.fullmatch(self.pattern, value):
            raise SpecError(where, path, f"expected {self.what}, got {describe(value)}")
        if self.test:
            problem = self.test(value)
            if problem:
                raise SpecError(where, path, problem)


@dataclass
class Int(Schema):
    minimum: int | None = None
    maximum: int | None = None
    expected: str = "an integer"

    def check(self, value, path, where, partial):
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(where, path, f"expected an integer, got {describe(value)}")
        if self.minimum is not None and value < self.minimum:
            raise SpecError(where, path, f"must be at least {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise SpecError(where, path, f"must be at most {self.maximum}, got {value}")


@dataclass
class Bool(Schema):
    expected: str = "true or false"

    def check(self, value, path, where, partial):
        if not isinstance(value, bool):
            raise SpecError(where, path, f"expected true or false, got {describe(value)}")


@dataclass
class Enum(Schema):
    choices: tuple

    @property
    def expected(self) -> str:
        return "one of " + ", ".join(self.choices)

    def check(self, value, path, where, partial):
        if value not in self.choices:
            close = difflib.get_close_matches(str(value), self.choices, n=1)
            hint = f"did you mean {close[0]!r}?" if close else None
            raise SpecError(where, path, f"expected {self.expected}, got {describe(value)}", hint=hint)


@dataclass
class ListOf(Schema):
    item: Schema
    max_items: int = 10_000
    unique: bool = False

    @property
    def expected(self) -> str:
        return f"a list of {self.item.expected}"

    def check(self, value, path, where, partial):
        if not isinstance(value, list):
            raise SpecError(where, path, f"expected {self.expected}, got {describe(value)}")
        if len(value) > self.max_items:
            raise SpecError(where, path, f"at most {self.max_items} items, got {len(value)}")
        seen: dict = {}
        for i, item in enumerate(value):
            item_where = value.at(i) if isinstance(value, YList) else where
            self.item.check(item, f"{path}[{i}]", item_where, partial)
            if self.unique:
                marker = repr(item)
                if marker in seen:
                    raise SpecError(item_where, f"{path}[{i}]", f"duplicate of {path}[{seen[marker]}]")
                seen[marker] = i


@dataclass
class OneOf(Schema):
    """A value that may take one of several shapes (for example a string or a list)."""

    options: tuple

    @property
    def expected(self) -> str:
        return " or ".join(o.expected for o in self.options)

    def check(self, value, path, where, partial):
        for option in self.options:
            if _shape_matches(option, value):
                option.check(value, path, where, partial)
                return
        raise SpecError(where, path, f"expected {self.expected}, got {describe(value)}", hint=_quote_hint(value))


def _shape_matches(schema: Schema, value: Any) -> bool:
    if isinstance(schema, (Record, MapOf)):
        return isinstance(value, dict)
    if isinstance(schema, ListOf):
        return isinstance(value, list)
    if isinstance(schema, Str):
        return isinstance(value, str) or (schema.allow_int and isinstance(value, int) and not isinstance(value, bool))
    if isinstance(schema, Int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(schema, Bool):
        return isinstance(value, bool)
    return True


@dataclass
class MapOf(Schema):
    value: Schema
    key_pattern: str | None = None
    key_what: str = "a key"
    max_items: int = 10_000

    @property
    def expected(self) -> str:
        return f"a mapping of {self.key_what} to {self.value.expected}"

    def check(self, value, path, where, partial):
        if not isinstance(value, dict):
            raise SpecError(where, path, f"expected {self.expected}, got {describe(value)}")
        if len(value) > self.max_items:
            raise SpecError(where, path, f"at most {self.max_items} entries, got {len(value)}")
        for key, item in value.items():
            key_where = value.at(key) if isinstance(value, YMap) else where
            if self.key_pattern and not re.fullmatch(self.key_pattern, key):
                raise SpecError(key_where, f"{path}.{key}", f"invalid key: expected {self.key_what}")
            self.value.check(item, f"{path}.{key}", key_where, partial)


@dataclass
class Record(Schema):
    fields: dict
    required: tuple = ()
    exclusive: tuple = ()  # groups of keys of which at most one may be given
    need_one_of: tuple = ()  # at least one of these keys must be given
    doc: str = "a mapping"
    extra_check: Callable | None = field(default=None)

    @property
    def expected(self) -> str:
        return self.doc

    def check(self, value, path, where, partial):
        if not isinstance(value, dict):
            raise SpecError(where, path, f"expected {self.doc}, got {describe(value)}")
        own_where = value.where if isinstance(value, YMap) else where
        for key, item in value.items():
            key_where = value.at(key) if isinstance(value, YMap) else where
            sub = f"{path}.{key}" if path else key
            if key not in self.fields:
                close = difflib.get_close_matches(key, list(self.fields), n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}?" if close else "known keys: " + ", ".join(sorted(self.fields))
                raise SpecError(key_where, sub, "unknown key", hint=hint)
            self.fields[key].check(item, sub, key_where, partial)
        for group in self.exclusive:
            given = [k for k in group if k in value]
            if len(given) > 1:
                raise SpecError(value.at(given[1]) if isinstance(value, YMap) else where,
                                path, f"give only one of {', '.join(group)} (got {', '.join(given)})")
        if partial:
            return
        for key in self.required:
            if key not in value:
                raise SpecError(own_where, f"{path}.{key}" if path else key, "required key is missing")
        if self.need_one_of and not any(k in value for k in self.need_one_of):
            raise SpecError(own_where, path, "needs one of: " + ", ".join(self.need_one_of))
        if self.extra_check:
            self.extra_check(value, path, own_where)
