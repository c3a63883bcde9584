"""Documents as they cross a boundary: what the engine's API and registries answer, and what
enginebuild writes and reads back (lockfile pins, store records, the no-op memo, build history,
SBOM and provenance, `--json` output, spec nodes as YAML gives them). Code on either side of a
boundary reads such a document into dataclasses, or writes one from them; a function taking or
returning a `JsonDoc` is such an edge (a serialiser), never a domain function."""

from __future__ import annotations

from typing import Any

JsonDoc = dict[str, Any]

# a value as a parser gave it (YAML, JSON), not yet checked: `object`, not `Any`, so that nothing is
# read from it before a check narrows its type (isinstance), which mypy --strict holds every reader to
Parsed = object
