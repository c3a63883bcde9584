"""Spec validation: every error names file:line and key path, exits 2, writes nothing."""
import os

import pytest
from conftest import run_cli
from helpers.specs import write_image, write_patch

from enginebuild.catalog import Catalog
from enginebuild.errors import SpecError, UserError

MINIMAL = """
base: scratch
platform: linux/amd64
"""


def load(workspace, name):
    return Catalog(workspace).load(name)


def spec_error(workspace, name) -> str:
    with pytest.raises(UserError) as info:
        load(workspace, name)
    return info.value.message


def test_a_minimal_spec_loads_with_defaults(workspace):
    write_image(workspace, "t", "base: scratch\n")
    spec = load(workspace, "t")
    assert spec.platform == "linux/arm64"
    assert spec.engine is None and spec.patches == ()


def test_unknown_keys_are_refused_with_a_did_you_mean(workspace):
    write_image(workspace, "t", MINIMAL + "patchs: []\n")
    with pytest.raises(SpecError) as info:
        load(workspace, "t")
    assert info.value.message == "images/t/image.yaml:3: patchs: unknown key"
    assert info.value.hint == "did you mean 'patches'?"


def test_unknown_keys_without_a_close_match_list_the_known_keys(workspace):
    write_image(workspace, "t", MINIMAL + "enviroment:\n  A: b\n")
    with pytest.raises(SpecError) as info:
        load(workspace, "t")
    assert info.value.hint.startswith("known keys: abstract, base, cmd")


def test_nested_unknown_keys_name_the_full_key_path(workspace):
    write_image(workspace, "t", MINIMAL + "engine:\n  name: e\n  source:\n    gti: {url: file:///x, ref: main}\n")
    message = spec_error(workspace, "t")
    assert message == "images/t/image.yaml:6: engine.source.gti: unknown key"


def test_wrong_types_say_what_was_expected_and_what_was_found(workspace):
    write_image(workspace, "t", MINIMAL + "expose: [\"8000\"]\n")
    assert spec_error(workspace, "t") == "images/t/image.yaml:3: expose[0]: expected an integer, got string '8000'"


def test_yes_no_on_where_a_string_is_meant_is_refused_with_a_hint(workspace):
    write_image(workspace, "t", MINIMAL + "env:\n  ENABLE_TURBOQUANT: on\n")
    with pytest.raises(SpecError) as info:
        load(workspace, "t")
    assert info.value.message == "images/t/image.yaml:4: env.ENABLE_TURBOQUANT: expected a string (quote it), got boolean true"
    assert "quote" in info.value.hint


def test_a_float_arch_list_is_refused_because_yaml_would_drop_digits(workspace):
    write_image(workspace, "t", MINIMAL + "env:\n  TORCH_CUDA_ARCH_LIST: 12.10\n")
    assert "got number 12.1" in spec_error(workspace, "t")


def test_a_missing_required_key_is_named(workspace):
    write_image(workspace, "t", "platform: linux/amd64\n")
    assert spec_error(workspace, "t") == "images/t/image.yaml:1: base: required key is missing"


def test_a_missing_file_is_named_with_its_line(workspace):
    write_image(workspace, "t", MINIMAL + "files:\n  /opt/x/launch.sh: launch.sh\n")
    assert spec_error(workspace, "t") == \
        "images/t/image.yaml:4: files./opt/x/launch.sh: file not found: images/t/launch.sh"


def test_paths_leaving_the_image_folder_are_refused(workspace):
    write_image(workspace, "t", MINIMAL + "files:\n  /opt/x/passwd: ../../../etc/passwd\n")
    assert "'..' is not allowed" in spec_error(workspace, "t")


def test_symlinks_escaping_the_image_folder_are_refused(workspace):
    folder = write_image(workspace, "t", MINIMAL + "files:\n  /opt/x/passwd: link\n")
    os.symlink("/etc/passwd", folder / "link")
    assert "resolves outside the image folder" in spec_error(workspace, "t")


def test_destination_paths_with_shell_or_dockerfile_syntax_are_refused(workspace):
    write_image(workspace, "t", MINIMAL + "files:\n  \"/opt/$(id)\": a.sh\n", {"a.sh": "echo\n"})
    assert "invalid key" in spec_error(workspace, "t")


def test_a_git_ref_that_could_be_an_option_is_refused(workspace):
    write_image(workspace, "t", MINIMAL + "engine:\n  name: e\n  source:\n    git: {url: 'file:///x', ref: '--upload-pack=touch'}\n")
    assert "invalid git ref" in spec_error(workspace, "t")


def test_patches_must_exist_under_patches(workspace):
    write_image(workspace, "t", MINIMAL + "engine:\n  name: e\n  source: {path: src}\npatches: [e/0001-x.patch]\n",
                {"src/a.c": "int x;\n"})
    assert spec_error(workspace, "t") == "images/t/image.yaml:6: patches[0]: patch not found: patches/e/0001-x.patch"


def test_extends_merges_mappings_and_replaces_lists(workspace):
    write_image(workspace, "parent", "abstract: true\nbase: scratch\nplatform: linux/amd64\n"
                "env: {A: a, B: b}\nfiles:\n  /opt/p.sh: p.sh\nexpose: [1]\n", {"p.sh": "echo p\n"})
    write_image(workspace, "child", "extends: parent\nenv: {B: c}\nfiles:\n  /opt/c.sh: c.sh\nexpose: [2]\n",
                {"c.sh": "echo c\n"})
    spec = load(workspace, "child")
    assert dict(spec.env) == {"A": "a", "B": "c"}
    assert [f.dest for f in spec.files] == ["/opt/c.sh", "/opt/p.sh"]
    assert [f.display for f in spec.files] == ["images/child/c.sh", "images/parent/p.sh"]
    assert spec.expose == (2,)
    assert not spec.abstract and load(workspace, "parent").abstract


def test_cycles_in_extends_are_refused(workspace):
    write_image(workspace, "a", "extends: b\nbase: scratch\n")
    write_image(workspace, "b", "extends: a\n")
    assert spec_error(workspace, "a") == "images/b/image.yaml:1: extends: cycle in extends: a -> b -> a"


def test_errors_in_an_extended_spec_name_that_file(workspace):
    write_image(workspace, "parent", "abstract: true\nbase: scratch\nenv: {A: yes}\n")
    write_image(workspace, "child", "extends: parent\n")
    assert spec_error(workspace, "child").startswith("images/parent/image.yaml:3: env.A:")


def test_unknown_image_names_get_a_suggestion(workspace):
    write_image(workspace, "qwen36-dflash", MINIMAL)
    with pytest.raises(UserError) as info:
        load(workspace, "qwen36-dlfash")
    assert info.value.hint == "did you mean 'qwen36-dflash'?"


def test_cli_reports_spec_errors_with_exit_2_and_no_traceback(workspace):
    write_image(workspace, "t", MINIMAL + "labels:\n  org.x: \"a\\nLABEL evil=1\"\n")
    proc = run_cli(["lock", "t"], workspace)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: images/t/image.yaml:4: labels.org.x: newlines and NUL bytes are not allowed")
    assert not (workspace / "lockfiles" / "t.lock").exists()


def test_a_patch_stack_without_an_engine_is_refused(workspace):
    write_patch(workspace, "e/0001-x.patch", "Subject: x\nDescription: y\nUpstream: z\n---\n"
                "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n")
    write_image(workspace, "t", MINIMAL + "patches: [e/0001-x.patch]\n")
    assert "needs an engine" in spec_error(workspace, "t")
