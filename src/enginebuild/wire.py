"""Documents as they cross a boundary: what the engine's API and registries answer, and what
enginebuild writes and reads back (lockfile pins, store records, the no-op memo, build history,
SBOM and provenance, `--json` output, spec nodes as YAML gives them). Code on either side of a
boundary reads such a document into dataclasses, or writes one from them; a function taking or
returning a `JsonDoc` is such an edge (a serialiser), never a domain function."""

from __future__ import annotations

import json
from typing import Any

JsonDoc = dict[str, Any]

# a value as a parser gave it (YAML, JSON), not yet checked: `object`, not `Any`, so that nothing is
# read from it before a check narrows its type (isinstance), which mypy --strict holds every reader to
Parsed = object

MAX_DEPTH = 64  # nesting of a JSON document another party wrote: no format enginebuild reads nests deeper


class TooDeep(ValueError):
    """A document nested deeper than MAX_DEPTH (a ValueError, as a malformed one is)."""


def loads(data: str | bytes | bytearray, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads for what another party wrote (a registry's answer, a cache entry, a bundle, what a
    container printed): a document nested deeper than `max_depth` is refused as malformed (a
    ValueError), never a RecursionError in the parser or in whatever walks it after."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise TooDeep(f"nested deeper than {max_depth} levels") from None
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > max_depth:
                raise TooDeep(f"nested deeper than {max_depth} levels")
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return value


def loads_object(data: str | bytes | bytearray) -> JsonDoc:
    """`loads` of a document that must be a JSON object (a manifest, an index, a config)."""
    value = loads(data)
    if not isinstance(value, dict):
        raise ValueError(f"a JSON {type(value).__name__}, not an object")
    return value
