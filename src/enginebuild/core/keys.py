"""Keys: digests of exactly the inputs that shape a node's bytes."""

from __future__ import annotations

import datetime as dt
import hashlib
import json

KEY_VERSION = "enginebuild-key-v2"
DEFAULT_EPOCH = 1  # 1970-01-01T00:00:01Z, as Nix dates store paths: never "unknown"


def sha(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def key_of(kind: str, **parts: object) -> str:
    return sha(canonical({"v": KEY_VERSION, "kind": kind, **parts}))


def files_layer(entries: list[tuple[str, int, str]], epoch: int) -> str:
    """The key of a layer of copied files: each (destination, mode, content digest), and the time stamp."""
    return key_of("files", entries=[list(e) for e in entries], epoch=epoch)


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
