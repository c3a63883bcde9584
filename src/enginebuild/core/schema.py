"""A small declarative schema for located YAML trees.

Each node validates a value in place and says exactly where it is wrong: file:line, the
key path and what was expected; unknown keys get a "did you mean" when one is close. The
same nodes emit the JSON Schema of `image.yaml` (see recipe/jsonschema.py), so editors
validate what the loader validates.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from enginebuild.core.yamlload import YList, YMap
from enginebuild.errors import SpecError, Where
from enginebuild.wire import Parsed

Json = dict[str, Any]
Test = Callable[[str], "str | None"]  # returns an error message, or None when the value is fine


def describe(value: Parsed) -> str:
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


def _quote_hint(value: Parsed) -> str | None:
    if isinstance(value, bool):
        return "YAML reads yes/no/on/off/true/false as booleans; quote the value to mean a string"
    if isinstance(value, float):
        return "YAML reads this as a number and may drop digits (12.10 -> 12.1); quote it"
    return None


def _at(value: Parsed, key: str | int, fallback: Where | None) -> Where | None:
    if isinstance(key, str) and isinstance(value, YMap):
        return value.at(key)
    if isinstance(key, int) and isinstance(value, YList):
        return value.at(key)
    return fallback


class Schema:
    expected = "a value"
    description = ""

    def check(self, value: Parsed, path: str, where: Where | None, partial: bool) -> None:
        raise NotImplementedError

    def json_schema(self) -> Json:
        raise NotImplementedError


@dataclass
class Str(Schema):
    pattern: str | None = None
    what: str = "a string"
    allow_int: bool = False
    test: Test | None = None
    description: str = ""
    hint: Callable[[str], str | None] | None = None  # a hint for a value the pattern refuses

    @property
    def expected(self) -> str:  # type: ignore[override]
        return self.what

    def check(self, value: Parsed, path: str, where: Where | None, partial: bool) -> None:
        if self.allow_int and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise SpecError(where, path, f"expected {self.what}, got {describe(value)}", hint=_quote_hint(value))
        if "\x00" in value:
            raise SpecError(where, path, "NUL byte in value")
        if self.pattern and not re.fullmatch(self.pattern, value):
            raise SpecError(where, path, f"expected {self.what}, got {describe(value)}",
                            hint=self.hint(value) if self.hint else None)
        if self.test:
            problem = self.test(value)
            if problem:
                raise SpecError(where, path, problem)

    def json_schema(self) -> Json:
        out: Json = {"type": ["string", "integer"] if self.allow_int else "string"}
        if self.pattern:
            out["pattern"] = f"^(?:{self.pattern})$"
        out["description"] = self.description or self.what
        return out


@dataclass
class Int(Schema):
    minimum: int | None = None
    maximum: int | None = None
    expected: str = "an integer"
    description: str = ""

    def check(self, value: Parsed, path: str, where: Where | None, partial: bool) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(where, path, f"expected an integer, got {describe(value)}")
        if self.minimum is not None and value < self.minimum:
            raise SpecError(where, path, f"must be at least {self.minimum}, got {value}")
        if self.maximum is not None and value > self.maximum:
            raise SpecError(where, path, f"must be at most {self.maximum}, got {value}")

    def json_schema(self) -> Json:
        out: Json = {"type": "integer"}
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.description:
            out["description"] = self.description
        return out


@dataclass
class Bool(Schema):
    expected: str = "true or false"
    description: str = ""

    def check(self, value: Parsed, path: str, where: Where | None, partial: bool) -> None:
        if not isinstance(value, bool):
            raise SpecError(where, path, f"expected true or false, got {describe(value)}")

    def json_schema(self) -> Json:
        return {"type": "boolean", **({"description": self.description} if self.description else {})}


@dataclass
class Enum(Schema):
    choices: tuple[str, ...]
    description: str = ""

    @property
    def expected(self) -> str:  # type: ignore[override]
        return "one of " + ", ".join(self.choices)

    def check(self, value: Parsed, path: str, where: Where | None, partial: bool) -> None:
        if value not in self.choices:
            close = difflib.get_close_matches(str(value), self.choices, n=1)
            hint = f"did you mean {close[0]!r}?" if close else None
            raise SpecError(where, path, f"expected {self.expected}, got {describe(value)}", hint=hint)

    def json_schema(self) -> Json:
        return {"enum": list(self.choices), **({"description": self.description} if self.description else {})}


@dataclass
class ListOf(Schema):
    item: Schema
    max_items: int = 10_000
    unique: bool = False
    description: str = ""
    what: str = ""  # what the list is, in words (else "a list of" its item)

    @property
    def expected(self) -> str:  # type: ignore[override]
        return self.what or f"a list of {self.item.expected}"

    def check(self, value: Parsed, path: str, where: Where | None, partial: bool) -> None:
        if not isinstance(value, list):
            raise SpecError(where, path, f"expected {self.expected}, got {describe(value)}")
        if len(value) > self.max_items:
            raise SpecError(where, path, f"at most {self.max_items} items, got {len(value)}")
        seen: dict[str, int] = {}
        for i, item in enumerate(value):
            item_where = _at(value, i, where)
            self.item.check(item, f"{path}[{i}]", item_where, partial)
            if self.unique:
                marker = repr(item)
                if marker in seen:
                    raise SpecError(item_where, f"{path}[{i}]", f"duplicate of {path}[{seen[marker]}]")
                seen[marker] = i

    def json_schema(self) -> Json:
        out: Json = {"type": "array", "items": self.item.json_schema(), "maxItems": self.max_items}
        if self.unique:
            out["uniqueItems"] = True
        if self.description:
            out["description"] = self.description
        return out


def _shape_matches(schema: Schema, value: Parsed) -> bool:
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
class OneOf(Schema):
    """A value that may take one of several shapes (for example a string or a mapping)."""

    options: tuple[Schema, ...]
    description: str = ""

    @property
    def expected(self) -> str:  # type: ignore[override]
        return " or ".join(o.expected for o in self.options)

    def check(self, value: Parsed, path: str, where: Where | None, partial: bool) -> None:
        shaped = [option for option in self.options if _shape_matches(option, value)]
        if isinstance(value, dict) and len(shaped) > 1:
            # several mappings: the one that knows every key given, else the one whose required keys are there
            records = [o for o in shaped if isinstance(o, Record)]
            fitting = ([o for o in records if set(value) <= set(o.fields)]
                       or [o for o in records if all(k in value for k in o.required)])
            shaped = fitting + [o for o in shaped if o not in fitting]
        if shaped:
            shaped[0].check(value, path, where, partial)
            return
        raise SpecError(where, path, f"expected {self.expected}, got {describe(value)}", hint=_quote_hint(value))

    def json_schema(self) -> Json:
        out: Json = {"anyOf": [o.json_schema() for o in self.options]}
        if self.description:
            out["description"] = self.description
        return out


@dataclass
class MapOf(Schema):
    value: Schema
    key_pattern: str | None = None
    key_what: str = "a key"
    max_items: int = 10_000
    nullable: bool = False  # a null value removes an inherited entry (see recipe/catalog.py)
    description: str = ""

    @property
    def expected(self) -> str:  # type: ignore[override]
        return f"a mapping of {self.key_what} to {self.value.expected}"

    def check(self, value: Parsed, path: str, where: Where | None, partial: bool) -> None:
        if not isinstance(value, dict):
            raise SpecError(where, path, f"expected {self.expected}, got {describe(value)}")
        if len(value) > self.max_items:
            raise SpecError(where, path, f"at most {self.max_items} entries, got {len(value)}")
        for key, item in value.items():
            key_where = _at(value, key, where)
            if self.key_pattern and not re.fullmatch(self.key_pattern, key):
                raise SpecError(key_where, f"{path}.{key}", f"invalid key: expected {self.key_what}")
            if item is None and self.nullable:
                continue
            self.value.check(item, f"{path}.{key}", key_where, partial)

    def json_schema(self) -> Json:
        value = self.value.json_schema()
        if self.nullable:
            value = {"anyOf": [value, {"type": "null"}]}
        out: Json = {"type": "object", "additionalProperties": False, "maxProperties": self.max_items,
                     "patternProperties": {f"^(?:{self.key_pattern or '.*'})$": value}}
        if self.description:
            out["description"] = self.description
        return out


# Dockerfile instructions users reach for: a clear word instead of a far-fetched suggestion.
INSTRUCTION_KEYS = {
    "add": "files", "copy": "files", "run": "steps", "arg": "variants (or --set for a one-off build)",
    "from": "base", "volume": None, "onbuild": None, "maintainer": "labels", "healthchecks": "healthcheck",
    "ports": "expose", "environment": "env", "command": "cmd",
}


@dataclass
class Record(Schema):
    fields: dict[str, Schema]
    required: tuple[str, ...] = ()
    exclusive: tuple[tuple[str, ...], ...] = ()  # groups of keys of which at most one may be given
    need_one_of: tuple[str, ...] = ()  # at least one of these keys must be given
    doc: str = "a mapping"
    extra_check: Callable[[YMap, str, Where | None], None] | None = field(default=None)
    description: str = ""

    @property
    def expected(self) -> str:  # type: ignore[override]
        return self.doc

    def _unknown(self, key: str, where: Where | None, path: str) -> SpecError:
        lookalike = difflib.get_close_matches(key.lower(), list(INSTRUCTION_KEYS), n=1, cutoff=0.85)
        own = difflib.get_close_matches(key, list(self.fields), n=1, cutoff=0.75)

        def ratio(a: str, b: str) -> float:
            return difflib.SequenceMatcher(None, a, b).ratio()

        if lookalike and own and ratio(key, own[0]) > ratio(key.lower(), lookalike[0]):
            lookalike = []  # a misspelt key of ours (`enviroments`) before a Docker word (`environment`)
        if lookalike and key not in self.fields and INSTRUCTION_KEYS[lookalike[0]] != key:
            instead = INSTRUCTION_KEYS[lookalike[0]]
            hint = f"use {instead} instead" if instead else f"enginebuild images have no {key!r}"
            return SpecError(where, path, "unknown key", hint=hint)
        close = difflib.get_close_matches(key, list(self.fields), n=1, cutoff=0.75)
        hint = f"did you mean {close[0]!r}?" if close else "known keys here: " + ", ".join(sorted(self.fields))
        return SpecError(where, path, "unknown key", hint=hint)

    def check(self, value: Parsed, path: str, where: Where | None, partial: bool) -> None:
        if not isinstance(value, dict):
            raise SpecError(where, path, f"expected {self.doc}, got {describe(value)}")
        own_where = value.where if isinstance(value, YMap) else where
        for key, item in value.items():
            key_where = _at(value, key, where)
            sub = f"{path}.{key}" if path else key
            if key not in self.fields:
                raise self._unknown(key, key_where, sub)
            if item is None and partial:
                continue  # null removes what a parent defined (see recipe/catalog.py)
            self.fields[key].check(item, sub, key_where, partial)
        for group in self.exclusive:
            given = [k for k in group if k in value and value[k] is not None]
            if len(given) > 1:
                raise SpecError(_at(value, given[1], where), path,
                                f"give only one of {', '.join(group)} (got {', '.join(given)})")
        if partial:
            return
        for key in self.required:
            if key not in value or value[key] is None:
                raise SpecError(own_where, f"{path}.{key}" if path else key, "required key is missing")
        if self.need_one_of and not any(value.get(k) is not None for k in self.need_one_of):
            raise SpecError(own_where, path, "needs one of: " + ", ".join(self.need_one_of))
        if self.extra_check and isinstance(value, YMap):
            self.extra_check(value, path, own_where)

    def json_schema(self) -> Json:
        out: Json = {"type": "object", "additionalProperties": False,
                     "properties": {k: v.json_schema() for k, v in self.fields.items()}}
        if self.required:
            out["required"] = list(self.required)
        constraints: list[Json] = []
        for group in self.exclusive:
            constraints.append({"not": {"anyOf": [{"required": [a, b]} for i, a in enumerate(group)
                                                  for b in group[i + 1:]]}})
        if self.need_one_of:
            constraints.append({"anyOf": [{"required": [k]} for k in self.need_one_of]})
        if constraints:
            out["allOf"] = constraints
        out["description"] = self.description or self.doc
        return out
