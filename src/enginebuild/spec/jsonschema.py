"""The JSON Schema of image.yaml, generated from the very nodes the loader validates with."""

from __future__ import annotations

from typing import Any

from enginebuild.spec import fields

SCHEMA_ID = "https://enginebuild.invalid/schema/image.json"


def image_json_schema() -> dict[str, Any]:
    schema = fields.image().json_schema()
    schema.pop("required", None)  # an abstract spec (abstract: true) may leave base out
    schema["allOf"] = schema.get("allOf", []) + [
        {"if": {"not": {"properties": {"abstract": {"const": True}}, "required": ["abstract"]}},
         "then": {"anyOf": [{"required": ["base"]}, {"required": ["extends"]}]}}]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "enginebuild image spec (images/<name>/image.yaml)", **schema}
