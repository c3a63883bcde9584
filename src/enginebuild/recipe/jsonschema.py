"""The JSON Schema of image.yaml, generated from the very nodes the loader validates with."""

from __future__ import annotations

from enginebuild.recipe import fields, patchchecks
from enginebuild.wire import JsonDoc

SCHEMA_ID = "https://enginebuild.invalid/schema/image.json"
CHECKS_ID = "https://enginebuild.invalid/schema/patch-checks.json"


def checks_json_schema() -> JsonDoc:
    """The JSON Schema of a patch's checks file (patches/<component>/<name>.checks.yaml)."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": CHECKS_ID,
            "title": "enginebuild patch checks (patches/<component>/<name>.checks.yaml)",
            **patchchecks.SCHEMA.json_schema()}


def image_json_schema() -> JsonDoc:
    """A spec that `extends` another may leave out anything its parent gives (a component's
    `build`, a required key at any depth), so the schema is the relaxed one, and a spec that
    extends nothing must also satisfy the whole one."""
    strict = fields.image().json_schema()
    strict.pop("required", None)  # an abstract spec (abstract: true) may leave base out
    strict["allOf"] = strict.get("allOf", []) + [
        {"if": {"not": {"properties": {"abstract": {"const": True}}, "required": ["abstract"]}},
         "then": {"anyOf": [{"required": ["base"]}, {"required": ["extends"]}]}}]
    schema = relaxed(strict)
    assert isinstance(schema, dict)  # a mapping stays a mapping
    schema["allOf"] = [{"if": {"not": {"required": ["extends"]}}, "then": strict}]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "enginebuild image spec (images/<name>/image.yaml)", **schema}


def relaxed(node: object) -> object:
    """`node` without what an inherited value could satisfy: required keys, and "one of these
    keys must be given" (keys given together that exclude each other stay refused); any key may
    be null, which removes what the parent gave."""
    if isinstance(node, list):
        return [relaxed(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "required" and isinstance(value, list):
            continue
        if key == "not":  # keys that exclude each other: kept whole
            out[key] = value
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: {"anyOf": [{"type": "null"}, relaxed(sub)]} for name, sub in value.items()}
            continue
        if key == "allOf":
            value = [v for v in value if not _needs_one_of(v) and "if" not in v]
            if not value:
                continue
        out[key] = relaxed(value)
    return out


def _needs_one_of(node: object) -> bool:
    return isinstance(node, dict) and list(node) == ["anyOf"] and all(
        isinstance(alt, dict) and list(alt) == ["required"] for alt in node["anyOf"])
