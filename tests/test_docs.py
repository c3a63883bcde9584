"""docs/spec.md is the reference of image.yaml: every key the loader's schema knows (at any
depth) is named there, in backticks, so a key cannot be added without being documented; and
docs/image.schema.json, the JSON Schema editors use, is generated from the same schema and
agrees with the loader."""
import json
import re

import yaml

from conftest import ROOT
from helpers.inprocess import run_in_process


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
    proc = run_in_process(["schema"], ROOT)
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    keys = schema_keys(schema, schema.get("$defs", {}))
    assert {"components", "outputs", "cuda-verify", "fingerprint", "site-packages", "start-period"} <= keys
    documented = set()
    for code in re.findall(r"`([^`]+)`", (ROOT / "docs/spec.md").read_text()):
        documented |= set(re.findall(r"[A-Za-z][A-Za-z0-9-]*", code))
    assert sorted(keys - documented) == []


# -- the JSON Schema editors use agrees with the loader ---------------------------------------------

SCHEMA_FILE = ROOT / "docs/image.schema.json"
# errors of structure, which JSON Schema can say; the rest (versions, PEP 508, git URLs, paths,
# secrets, domain lints, YAML hazards) are the loader's alone
STRUCTURAL = ("unknown key", "expected a string (quote it)", "expected a list", "expected a mapping",
              "required key is missing", "give only one of", "must be at most", "invalid key",
              "a spec must be a mapping", "expected a full commit id", "expected an image reference",
              "expected a platform", "expected a duration", "duplicate of", "expected an integer")


def validator():
    import jsonschema

    return jsonschema.Draft202012Validator(json.loads(SCHEMA_FILE.read_text()))


def test_the_committed_json_schema_is_the_one_the_loader_generates():
    proc = run_in_process(["schema"], ROOT)
    assert proc.returncode == 0, proc.stderr
    assert SCHEMA_FILE.read_text() == proc.stdout, "regenerate: python BUILD.py schema --out docs/image.schema.json"


def test_every_spec_the_loader_accepts_validates_against_the_json_schema():
    specs = sorted(ROOT.glob("images/*/image.yaml")) + sorted(ROOT.glob("examples/images/*/image.yaml"))
    assert len(specs) >= 15
    check = validator()
    for path in specs:
        errors = [e.message for e in check.iter_errors(yaml.safe_load(path.read_text()))]
        assert errors == [], f"{path.relative_to(ROOT)}: {errors[:1]}"


def test_every_structural_error_of_the_bad_spec_corpus_is_a_json_schema_error_too():
    check = validator()
    structural = 0
    for path in sorted((ROOT / "tests/corpus/specs").glob("*.yaml")):
        text = path.read_text(encoding="utf-8", errors="replace")
        expect = re.search(r"# expect: (.*)", text).group(1).replace("\\", "")
        if not any(kind in expect for kind in STRUCTURAL):
            continue
        structural += 1
        document = yaml.safe_load(text)
        assert list(check.iter_errors(document)), f"{path.name}: the loader refuses it ({expect}), the schema does not"
    assert structural >= 25


def test_a_spec_that_extends_may_leave_out_what_its_parent_gives_and_one_that_does_not_may_not():
    check = validator()
    partial = {"extends": "spark-vllm-source", "components": {"vllm": {"source": {"pypi": {"version": "0.21.0"}}}}}
    assert list(check.iter_errors(partial)) == []
    alone = {"base": "scratch", "components": {"vllm": {"source": {"pypi": {"version": "0.21.0"}}}}}
    assert {e.message for e in check.iter_errors(alone)}
    both = {"extends": "x", "components": {"e": {"source": {"path": "a", "pypi": {"version": "1"}}}}}
    assert list(check.iter_errors(both)), "keys that exclude each other stay refused in a partial spec"


def test_spec_md_documents_every_per_build_option_the_cli_offers():
    """--set, --build-arg and --output: each verb's help offers them, and docs/spec.md's section on
    per-build values says what each does (and the key with dots written in brackets)."""
    text = (ROOT / "docs/spec.md").read_text()
    section = text[text.index("## Per-build values"):]
    section = section[:section.index("\n## ", 3)]
    offered = {"--set": run_in_process(["--help"], ROOT).stdout}
    for verb in ("image", "plan", "render"):
        offered[f"--build-arg ({verb})"] = run_in_process([verb, "--help"], ROOT).stdout
    offered["--output"] = offered["--build-arg (image)"]
    for flag, help_text in offered.items():
        name = flag.split()[0]
        assert name in help_text, f"{flag} is not in the help"
        assert f"`{name}" in section, f"docs/spec.md does not document {name}"
    assert "components[llama.cpp]" in section and "COMPONENT=DIR" in section


CHECKS_SCHEMA = ROOT / "docs/patch-checks.schema.json"


def test_the_committed_checks_schema_is_generated_and_every_checks_file_validates():
    import jsonschema

    proc = run_in_process(["schema", "--checks"], ROOT)
    assert proc.returncode == 0, proc.stderr
    assert CHECKS_SCHEMA.read_text() == proc.stdout, \
        "regenerate: python BUILD.py schema --checks --out docs/patch-checks.schema.json"
    check = jsonschema.Draft202012Validator(json.loads(CHECKS_SCHEMA.read_text()))
    files = sorted(ROOT.glob("patches/*/*.checks.yaml"))
    assert len(files) >= 2
    import yaml

    for path in files:
        errors = [e.message for e in check.iter_errors(yaml.safe_load(path.read_text()))]
        assert errors == [], (path, errors)
    assert list(check.iter_errors({"checks": [{"name": "x", "python": "1", "run": "true"}]}))


def test_the_readmes_first_build_names_its_platform_and_says_what_emulation_costs():
    """The demo names two platforms: a first `image demo` builds arm64 under emulation (minutes on
    an x86_64 machine with qemu registered), which the line a user copies first must not hide."""
    readme = (ROOT / "README.md").read_text()
    first = next(line for line in readme.splitlines() if line.strip().startswith("enginebuild image demo"))
    assert "--platform linux/amd64" in first, first
    assert "arm64 runs\nunder emulation" in readme or "arm64 runs under emulation" in readme
