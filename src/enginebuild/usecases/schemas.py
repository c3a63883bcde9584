"""`schema`: the JSON Schema of image.yaml (or of a patch's checks file), generated from the schema
the loader validates with, as text, printed or written atomically."""

from __future__ import annotations

import json
from pathlib import Path

from enginebuild.io.files import write_atomic
from enginebuild.recipe.jsonschema import checks_json_schema, image_json_schema


def schema_text(checks: bool) -> str:
    return json.dumps(checks_json_schema() if checks else image_json_schema(), indent=2, sort_keys=True) + "\n"


def write_schema(path: Path, checks: bool) -> None:
    write_atomic(path, schema_text(checks).encode())
