import pytest

from enginebuild.core.yamlload import MAX_BYTES, load_yaml_file, load_yaml_text
from enginebuild.errors import SpecError


def error_of(text: str) -> str:
    with pytest.raises(SpecError) as info:
        load_yaml_text(text, "images/x/image.yaml")
    return info.value.message


def test_every_key_remembers_its_line():
    tree = load_yaml_text("base: scratch\nengine:\n  name: vllm\n", "f.yaml")
    assert tree.at("base").line == 1
    assert tree["engine"].at("name").line == 3


def test_duplicate_keys_are_refused_with_both_lines():
    assert error_of("base: a\nenv:\n  A: 1\n  A: 2\n") == \
        "images/x/image.yaml:4: A: duplicate key (first defined at line 3)"


def test_python_tags_are_refused_before_anything_is_constructed():
    message = error_of("base: !!python/object/apply:os.system ['touch /tmp/pwned']\n")
    assert message.startswith("images/x/image.yaml:1: unsupported YAML tag")


def test_anchors_and_aliases_are_taken_and_an_alias_bomb_stops_at_the_bound():
    assert load_yaml_text("a: &a [x, y]\nb: *a\n", "images/x/image.yaml") == {"a": ["x", "y"], "b": ["x", "y"]}
    level = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 6))  # 10^6 values
    assert "expands to more than 100000 values" in error_of(level)


def test_merge_keys_merge_and_the_mappings_own_keys_win():
    assert load_yaml_text("a: &a {x: 1, y: 1}\nb:\n  <<: *a\n  x: 2\n", "images/x/image.yaml")["b"] == {"x": 2, "y": 1}
    assert "a YAML merge (<<) takes a mapping" in error_of("b:\n  <<: [1, 2]\n")


def test_nul_bytes_are_refused_with_their_line():
    assert error_of("base: scratch\nenv: {A: \"x\x00y\"}\n") == "images/x/image.yaml:2: NUL byte in file"


def test_non_string_keys_are_refused():
    assert "keys must be strings" in error_of("1: x\n")


def test_syntax_errors_name_the_line():
    assert error_of("base: [a, b\nenv: 1\n").startswith("images/x/image.yaml:")


def test_huge_files_are_refused_without_being_parsed(tmp_path):
    path = tmp_path / "image.yaml"
    path.write_bytes(b"a: " + b"x" * (MAX_BYTES + 1))
    with pytest.raises(SpecError) as info:
        load_yaml_file(path, "images/x/image.yaml")
    assert "at most" in info.value.message


def test_invalid_utf8_is_refused_with_its_line(tmp_path):
    path = tmp_path / "image.yaml"
    path.write_bytes(b"base: scratch\nenv: {A: \xff}\n")
    with pytest.raises(SpecError) as info:
        load_yaml_file(path, "images/x/image.yaml")
    assert info.value.message == "images/x/image.yaml:2: not valid UTF-8"


def test_deeply_nested_flow_sequences_are_a_clear_error_not_a_recursion_crash():
    message = error_of("base: scratch\nenv: " + "[" * 500 + "]" * 500 + "\n")
    assert message.startswith("images/x/image.yaml:2: nested more than")


def test_deeply_nested_mappings_are_refused_too():
    text = "base: scratch\nx: " + "{a: " * 200 + "1" + "}" * 200 + "\n"
    assert "nested more than" in error_of(text)


def test_a_lone_surrogate_escape_is_refused_with_its_line():
    message = error_of('base: scratch\nenv:\n  ROCKET: "\\ud83d\\ude80"\n')
    assert message.startswith("images/x/image.yaml:3: the value holds a lone UTF-16 surrogate")


def test_an_escaped_character_outside_the_bmp_is_fine():
    tree = load_yaml_text('env:\n  ROCKET: "\\U0001F680"\n', "f.yaml")
    assert tree["env"]["ROCKET"] == "\U0001F680"
