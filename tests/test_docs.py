"""docs/spec.md is the reference of image.yaml: every key the loader's schema knows (at any
depth) is named there, in backticks, so a key cannot be added without being documented."""
import json
import re

from conftest import ROOT, run_cli


def schema_keys(node, defs, seen=None) -> set:
    seen = set() if seen is None else seen
    keys = set()
    if "$ref" in node:
        name = node["$ref"].split("/")[-1]
        if name in seen:
            return keys
        seen = seen | {name}
        node = defs[name]
    for part in ("anyOf", "oneOf", "allOf"):
        for alt in node.get(part, []):
            keys |= schema_keys(alt, defs, seen)
    for key, value in (node.get("properties") or {}).items():
        keys.add(key)
        keys |= schema_keys(value, defs, seen)
    for value in (node.get("patternProperties") or {}).values():
        keys |= schema_keys(value, defs, seen)
    for part in ("additionalProperties", "items"):
        if isinstance(node.get(part), dict):
            keys |= schema_keys(node[part], defs, seen)
    return keys


def test_every_key_of_the_schema_is_documented_in_spec_md(tmp_path):
    proc = run_cli(["schema"], ROOT)
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    keys = schema_keys(schema, schema.get("$defs", {}))
    assert {"components", "outputs", "cuda-verify", "fingerprint", "site-packages", "start-period"} <= keys
    documented = set()
    for code in re.findall(r"`([^`]+)`", (ROOT / "docs/spec.md").read_text()):
        documented |= set(re.findall(r"[A-Za-z][A-Za-z0-9-]*", code))
    assert sorted(keys - documented) == []
