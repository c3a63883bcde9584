"""Keys: digests of exactly the inputs that shape a node's bytes.

A layer's key form: what of its payload a key is the digest of, derived from its fields.
As BuildKit digests an op from the op itself, a layer's key is derived from its payload's
dataclass fields, recursively, and not from a list someone keeps: every field is in the key
unless the field itself says it does not shape the bytes (`unkeyed(why)` in its metadata), or
says what of it does (`keyed_as(projection, why)`: a parsed patch by its sha256, a Dockerfile
without the FROM line the chain key folds in). So a field added to a payload, or to a value a
payload holds, moves the key unless it is declared otherwise at the field.

A field at its default is left out (as protobuf leaves defaults out of an op), so adding a field
with a default that keeps today's bytes keeps today's keys. Bytes are in the form by digest.
Anything else is refused: a host path, an open file, a mapping — a key may not depend on where
a checkout lies, and a new kind of value must say how it is keyed."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

KEY_VERSION = "enginebuild-key-v2"
DEFAULT_EPOCH = 1  # 1970-01-01T00:00:01Z, as Nix dates store paths: never "unknown"


def sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def key_of(kind: str, **parts: object) -> str:
    return sha(canonical({"v": KEY_VERSION, "kind": kind, **parts}))


def chain(parent: str, key: str) -> str:
    return sha(f"{parent}\n{key}")


def epoch(source_date_epoch: int | None) -> int:
    """The time stamp of every entry of every layer enginebuild writes."""
    return DEFAULT_EPOCH if source_date_epoch is None else source_date_epoch


def created_of(source_date_epoch: int | None) -> str:
    """The image's `created` (config, label, manifest): SOURCE_DATE_EPOCH when given, else the
    epoch its files carry. Never when the lock was written: the same pins give the same image."""
    value = epoch(source_date_epoch)
    return dt.datetime.fromtimestamp(value, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


UNKEYED = "enginebuild.unkeyed"
KEYED_AS = "enginebuild.keyed_as"

Form = None | bool | int | str | list["Form"] | dict[str, "Form"]


class Unkeyable(TypeError):
    """A value with no key form (a host path, a type no field says how to key)."""


def unkeyed(why: str) -> Mapping[str, object]:
    """Field metadata: this field does not shape the bytes (`why` says what does)."""
    if not why.strip():
        raise ValueError("an unkeyed field says why")
    return {UNKEYED: why}


def keyed_as(projection: Callable[[Any], object], why: str) -> Mapping[str, object]:
    """Field metadata: the field is in the key as `projection(value)` (`why`: what is left out)."""
    if not why.strip():
        raise ValueError("a projected field says why")
    return {KEYED_AS: projection}


def unkeyed_fields(kind: type) -> dict[str, str]:
    """The fields of a dataclass that declare they are not keyed, each with why."""
    return {f.name: str(f.metadata[UNKEYED]) for f in dataclasses.fields(kind) if UNKEYED in f.metadata}


def form(value: object, where: str = "value") -> Form:
    """The key form of `value` (`where`: its place, for the error a value with none gets)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, bytes):
        return {"bytes": sha(value)}
    if isinstance(value, tuple | list):
        return [form(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"@": type(value).__name__, **fields_form(value, where)}
    raise Unkeyable(f"{where}: a {type(value).__name__} has no key form; declare the field unkeyed(why) or "
                    f"keyed_as(projection, why)")


def fields_form(value: object, where: str) -> dict[str, Form]:
    """Each field of a dataclass instance that is keyed and not at its default, in key form."""
    out: dict[str, Form] = {}
    for f in dataclasses.fields(value):  # type: ignore[arg-type]
        if UNKEYED in f.metadata:
            continue
        item = getattr(value, f.name)
        if _at_default(f, item):
            continue
        projection = f.metadata.get(KEYED_AS)
        out[f.name] = form(projection(item) if projection else item, f"{where}.{f.name}")
    return out


def _at_default(f: dataclasses.Field[Any], item: object) -> bool:
    if f.default is not dataclasses.MISSING:
        return bool(item == f.default)
    if f.default_factory is not dataclasses.MISSING:
        return bool(item == f.default_factory())
    return False


def derived_key(kind: str, value: object, **parts: object) -> str:
    """The key of `value` as a `kind`: the digest of its fields' form and `parts`."""
    return key_of(kind, fields=fields_form(value, kind), **parts)
