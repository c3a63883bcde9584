"""Spec validation: every error names file:line and key path, exits 2, writes nothing."""
import os
from textwrap import dedent

import pytest

from enginebuild.errors import SpecError, UserError
from enginebuild.recipe.catalog import Catalog
from helpers.inprocess import run_in_process
from helpers.specs import write_image, write_patch

MINIMAL = """
base: scratch
platform: linux/amd64
"""
COMPONENT = """
components:
  e:
    source: {path: src}
    build: {script: build.sh}
    outputs: {paths: [/usr/local/bin/e]}
"""
FILES = {"src/a.c": "int a;\n", "build.sh": "#!/bin/sh\ntrue\n"}


def load(workspace, name, overrides=()):
    return Catalog(workspace).load(name, tuple(overrides))


def spec_error(workspace, name) -> str:
    with pytest.raises(UserError) as info:
        load(workspace, name)
    return info.value.message


def test_a_minimal_spec_loads_with_defaults(workspace):
    write_image(workspace, "t", "base: scratch\n")
    spec = load(workspace, "t")
    assert spec.platforms == ("linux/arm64",)
    assert spec.components == () and spec.all_patches == ()


def test_unknown_keys_are_refused_with_a_did_you_mean(workspace):
    write_image(workspace, "t", MINIMAL + "instal: []\n")
    with pytest.raises(SpecError) as info:
        load(workspace, "t")
    assert info.value.message == "images/t/image.yaml:3: instal: unknown key"
    assert info.value.hint == "did you mean 'install'?"


def test_a_far_fetched_suggestion_is_not_made(workspace):
    write_image(workspace, "t", MINIMAL + "enviroment:\n  A: b\n")
    with pytest.raises(SpecError) as info:
        load(workspace, "t")
    assert info.value.hint == "use env instead"
    write_image(workspace, "u", MINIMAL + "zzzz: 1\n")
    with pytest.raises(SpecError) as info:
        load(workspace, "u")
    assert info.value.hint.startswith("known keys here: abstract, base, build-env, builder")


def test_a_dockerfile_instruction_used_as_a_key_says_what_to_use(workspace):
    write_image(workspace, "t", MINIMAL + "healthchecks: {test: [true]}\n")
    with pytest.raises(SpecError) as info:
        load(workspace, "t")
    assert info.value.message == "images/t/image.yaml:3: healthchecks: unknown key"
    assert info.value.hint == "use healthcheck instead"


def test_nested_unknown_keys_name_the_full_key_path(workspace):
    write_image(workspace, "t", MINIMAL + COMPONENT.replace("{path: src}", "{gti: {url: 'file:///x', ref: main}}"),
                FILES)
    assert spec_error(workspace, "t") == "images/t/image.yaml:6: components.e.source.gti: unknown key"


def test_wrong_types_say_what_was_expected_and_what_was_found(workspace):
    write_image(workspace, "t", MINIMAL + "expose: [[8000]]\n")
    assert spec_error(workspace, "t") == ("images/t/image.yaml:3: expose[0]: expected an integer or a port such as "
                                          "8000, or PORT/PROTOCOL such as 5353/udp, got a list")


def test_yes_no_on_where_a_string_is_meant_is_refused_with_a_hint(workspace):
    write_image(workspace, "t", MINIMAL + "env:\n  ENABLE_TURBOQUANT: on\n")
    with pytest.raises(SpecError) as info:
        load(workspace, "t")
    assert info.value.message == ("images/t/image.yaml:4: env.ENABLE_TURBOQUANT: expected a string (quote it), "
                                  "got boolean true")
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


def test_paths_leaving_the_recipe_repository_are_refused(workspace):
    write_image(workspace, "t", MINIMAL + "files:\n  /opt/x/passwd: ../../../etc/passwd\n")
    assert "'../../../etc/passwd' resolves outside the recipe repository" in spec_error(workspace, "t")
    write_image(workspace, "t", MINIMAL + "files:\n  /opt/x/: '../../../*'\n")
    assert "resolves outside the recipe repository" in spec_error(workspace, "t")


def test_symlinks_escaping_the_recipe_repository_are_refused(workspace):
    folder = write_image(workspace, "t", MINIMAL + "files:\n  /opt/x/passwd: link\n")
    os.symlink("/etc/passwd", folder / "link")
    assert "'link' resolves outside the recipe repository (to /etc/passwd)" in spec_error(workspace, "t")


def test_files_may_come_from_a_shared_folder_of_the_recipe_repository(workspace):
    shared = workspace / "scripts"
    shared.mkdir()
    (shared / "wait.sh").write_text("#!/bin/sh\necho waiting\n")
    (shared / "wait.sh").chmod(0o755)
    (shared / "bench.sh").write_text("#!/bin/sh\necho bench\n")
    write_image(workspace, "t", MINIMAL + "files:\n  /opt/bin/wait.sh: ../../scripts/wait.sh\n"
                                          "  /opt/all/: '../../scripts/*.sh'\n")
    from enginebuild.recipe.catalog import Catalog

    groups = {g.key: g for g in Catalog(workspace).load("t").files}
    (wait,) = groups["/opt/bin/wait.sh"].entries
    assert (wait.display, wait.mode) == ("scripts/wait.sh", 0o755)
    assert sorted(e.dest for e in groups["/opt/all/"].entries) == ["/opt/all/bench.sh", "/opt/all/wait.sh"]


def test_destination_paths_with_shell_or_dockerfile_syntax_are_refused(workspace):
    write_image(workspace, "t", MINIMAL + "files:\n  \"/opt/$(id)\": a.sh\n", {"a.sh": "echo\n"})
    assert "invalid key" in spec_error(workspace, "t")


def test_a_git_ref_that_could_be_an_option_is_refused(workspace):
    write_image(workspace, "t", MINIMAL + COMPONENT.replace("{path: src}", "{git: {url: 'file:///x', "
                                                                         "ref: '--upload-pack=touch'}}"), FILES)
    assert "invalid git ref" in spec_error(workspace, "t")


def test_patches_must_exist_under_patches(workspace):
    write_image(workspace, "t", MINIMAL + COMPONENT + "    patches: [e/0001-x.patch]\n", FILES)
    assert spec_error(workspace, "t") == \
        "images/t/image.yaml:9: components.e.patches[0]: patch not found: patches/e/0001-x.patch"


def test_a_bad_patch_header_names_the_spec_line_that_uses_it_and_the_patch(workspace):
    write_patch(workspace, "e/0001-x.patch", "Subject: x\n---\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n")
    write_image(workspace, "t", MINIMAL + COMPONENT + "    patches: [e/0001-x.patch]\n", FILES)
    message = spec_error(workspace, "t")
    assert message.startswith("images/t/image.yaml:9: components.e.patches[0]: patches/e/0001-x.patch: header lacks")


def test_components_and_their_needs_are_checked(workspace):
    write_image(workspace, "t", MINIMAL + COMPONENT + "    needs: [nope]\n", FILES)
    assert spec_error(workspace, "t") == "images/t/image.yaml:9: components.e.needs: no component named 'nope'"


def test_a_cycle_of_needs_is_refused(workspace):
    text = MINIMAL + COMPONENT + "    needs: [f]\n" + COMPONENT.split("components:\n")[1].replace("  e:", "  f:") + \
        "    needs: [e]\n"
    write_image(workspace, "t", text, FILES)
    assert "cycle in needs: e -> f -> e" in spec_error(workspace, "t")


def test_components_are_ordered_needs_first_and_install_names_existing_ones(workspace):
    text = MINIMAL + COMPONENT.replace("  e:", "  z:") + "    needs: [a]\n" + \
        COMPONENT.split("components:\n")[1].replace("  e:", "  a:") + "install: [z]\n"
    write_image(workspace, "t", text, FILES)
    spec = load(workspace, "t")
    assert [c.name for c in spec.components] == ["a", "z"] and spec.install == ("z",)
    write_image(workspace, "u", MINIMAL + COMPONENT + "install: [y]\n", FILES)
    assert spec_error(workspace, "u") == "images/u/image.yaml:9: install[0]: no component named 'y'"


def test_extends_merges_mappings_and_replaces_lists(workspace):
    write_image(workspace, "parent", "abstract: true\nbase: scratch\nplatform: linux/amd64\n"
                "env: {A: a, B: b}\nfiles:\n  /opt/p.sh: p.sh\nexpose: [1]\n", {"p.sh": "echo p\n"})
    write_image(workspace, "child", "extends: parent\nenv: {B: c}\nfiles:\n  /opt/c.sh: c.sh\nexpose: [2]\n",
                {"c.sh": "echo c\n"})
    spec = load(workspace, "child")
    assert dict(spec.env) == {"A": "a", "B": "c"}
    assert [g.key for g in spec.files] == ["/opt/c.sh", "/opt/p.sh"]
    assert [g.entries[0].display for g in spec.files] == ["images/child/c.sh", "images/parent/p.sh"]
    assert spec.expose == ("2/tcp",)
    assert not spec.abstract and load(workspace, "parent").abstract


def test_a_child_can_replace_an_inherited_source_with_another_kind(workspace):
    write_image(workspace, "parent", "abstract: true\n" + MINIMAL + COMPONENT.replace(
        "{path: src}", "{pypi: {name: e, version: '1.0'}}"), FILES)
    write_image(workspace, "child", "extends: parent\ncomponents:\n  e:\n    source: {path: src}\n",
                {"src/a.c": "int a;\n"})
    spec = load(workspace, "child")
    assert spec.components[0].source.kind == "path"


def test_null_removes_what_a_parent_gave(workspace):
    write_image(workspace, "parent", "abstract: true\n" + MINIMAL + COMPONENT + "env: {A: a, B: b}\n", FILES)
    write_image(workspace, "child", "extends: parent\ncomponents:\n  e: null\nenv:\n  A: null\n")
    spec = load(workspace, "child")
    assert spec.components == () and dict(spec.env) == {"B": "b"}


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
    proc = run_in_process(["lock", "t"], workspace)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: images/t/image.yaml:4: labels.org.x: newlines and NUL bytes are not allowed")
    assert not (workspace / "lockfiles" / "t.lock").exists()


def test_a_patch_stack_without_a_source_is_refused(workspace):
    write_patch(workspace, "e/0001-x.patch", "Subject: x\nDescription: y\nUpstream: z\n---\n"
                "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n")
    write_image(workspace, "t", MINIMAL + COMPONENT.replace("    source: {path: src}\n", "") +
                "    patches: [e/0001-x.patch]\n", FILES)
    assert "a patch stack needs a source" in spec_error(workspace, "t")


def test_set_overrides_a_value_for_one_run_and_is_validated(workspace):
    write_image(workspace, "t", MINIMAL + "env: {A: a}\n")
    assert dict(load(workspace, "t", ["env.A=b"]).env) == {"A": "b"}
    with pytest.raises(UserError) as info:
        load(workspace, "t", ["expose=[x]"])
    assert info.value.message.startswith("--set expose")
    with pytest.raises(UserError) as info:  # a list's item: named as such, with the way that works
        load(workspace, "t", ["steps[0].run=echo hi"])
    assert "steps[0] names an item of a list, and --set does not reach into lists" in info.value.message
    assert info.value.hint == "give the whole list: --set 'steps=[...]' (YAML), or edit the spec"
    write_image(workspace, "t", MINIMAL + "labels: {org.example.build: a}\n")
    assert dict(load(workspace, "t", ["labels[org.example.build]=b"]).labels)["org.example.build"] == "b"


def test_a_spec_that_is_a_symlink_to_a_host_file_is_refused_without_showing_it(workspace):
    folder = write_image(workspace, "t", MINIMAL)
    (folder / "image.yaml").unlink()
    os.symlink("/etc/passwd", folder / "image.yaml")
    error = spec_error(workspace, "t")
    assert "symlink" in error and "root:" not in error


def test_an_image_folder_linked_from_outside_images_is_refused(workspace, tmp_path):
    outside = tmp_path / "elsewhere"
    write_image(outside, "t", MINIMAL)
    os.symlink(outside / "images" / "t", workspace / "images" / "t")
    assert "symlink" in spec_error(workspace, "t")


def test_yaml_anchors_aliases_and_merge_keys_are_taken_as_yaml_defines_them(workspace):
    """Recipes repeat a base or a set of flags; YAML's own way to say it once is accepted (an
    expansion past the bound is refused: tests/corpus/specs/06-billion-laughs.yaml)."""
    write_image(workspace, "t", dedent("""\
        base: &base scratch
        platform: linux/amd64
        build-env: &flags {OMP_NUM_THREADS: "4", TOKENIZERS_PARALLELISM: "false"}
        builder:
          base: *base
        env:
          <<: *flags
          TOKENIZERS_PARALLELISM: "true"
        """))
    spec = load(workspace, "t")
    assert spec.builder.base == "scratch" == spec.runtime.base
    assert dict(spec.env) == {"OMP_NUM_THREADS": "4", "TOKENIZERS_PARALLELISM": "true"}  # its own key wins
