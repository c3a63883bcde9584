"""What another party wrote costs enginebuild a bounded amount: JSON nested 5,000 deep is refused as
malformed (a ValueError, never a RecursionError), a container's output stream is read no further
than 1 MiB, a pattern that backtracks is stopped after its time, a line another party wrote is
shown escaped, capped and without a workflow command at its start, and an `--env` value cannot
add a line to a node's environment file. The Docker ground truth of each is in test_patch_behaviour,
test_cache_trust and test_signing."""
from __future__ import annotations

import io

import pytest

from enginebuild.errors import shown_line
from enginebuild.oci.output import OUTPUT_LIMIT, read_output
from enginebuild.recipe.patchchecks import SlowPattern, read_checks
from enginebuild.wire import MAX_DEPTH, loads, loads_object
from helpers.inprocess import run_in_process

DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize("text", [DEEP, '{"a":' * 5000 + "1" + "}" * 5000, "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)])
def test_json_nested_deeper_than_the_limit_is_malformed_not_a_recursion_error(text):
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        loads(text)


def test_json_within_the_limit_is_read_as_json_is():
    doc = '{"a": ' + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1) + ', "b": "c"}'
    assert loads_object(doc)["b"] == "c"
    with pytest.raises(ValueError, match="not an object"):
        loads_object("[1, 2]")


def frames(*parts: tuple[int, bytes]) -> io.BytesIO:
    """A container's log stream as the engine sends it without a TTY."""
    return io.BytesIO(b"".join(bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, "big") + data for stream, data in parts))


def test_a_containers_output_is_read_whole_below_the_limit():
    got = read_output(frames((1, b"out\n"), (2, b"err\n"), (1, b"more\n")))
    assert (got.out, got.err, got.over) == (b"out\nmore\n", b"err\n", False)


def test_a_containers_output_is_read_no_further_than_the_limit():
    class Endless:
        """A stream that never ends: each read answers a frame of 64 KiB, counted."""

        def __init__(self):
            self.served = 0
            self.pending = b""

        def read(self, amount=None):
            if not self.pending:
                self.pending = bytes([1, 0, 0, 0]) + (1 << 16).to_bytes(4, "big") + b"a" * (1 << 16)
            chunk, self.pending = self.pending[:amount], self.pending[amount:]
            self.served += len(chunk)
            return chunk

    stream = Endless()
    got = read_output(stream)
    assert got.over and len(got.out) == OUTPUT_LIMIT
    assert stream.served < OUTPUT_LIMIT + (1 << 17)  # it stopped reading at the limit


def test_a_stream_cut_short_is_what_it_held():
    data = frames((1, b"abc")).getvalue()[:-1]
    assert read_output(io.BytesIO(data)).out == b"ab"


def checks(tmp_path, pattern: str):
    patch = tmp_path / "0001-x.patch"
    patch.write_text("")
    patch.with_name("0001-x.checks.yaml").write_text(f"checks:\n  - name: c\n    run: \"true\"\n    expect-match: '{pattern}'\n")
    return read_checks(patch, "e/0001-x.patch", tmp_path)[0]


def test_the_probes_pattern_answers_at_once(tmp_path):
    check = checks(tmp_path, "(a+)+")  # 7 s for 26 characters before, x2-3 a character: now no SlowPattern
    assert not check.patched_by("a" * 64 + "b")  # far past what any bound could let backtracking reach
    assert check.patched_by("a" * 64)


def test_a_pattern_that_backtracks_is_stopped_after_its_time_and_named(tmp_path):
    check = checks(tmp_path, "(?:a|aa)+b")
    with pytest.raises(SlowPattern, match=r"matching /\(\?:a\|aa\)\+b/ against its 40 characters of output took over"):
        check.patched_by("a" * 40)


@pytest.mark.parametrize("line, shown", [
    ("::error file=x::owned", "> ::error file=x::owned"),
    ("  ::add-mask::x", "> ::add-mask::x"),
    ("\x1b]0;title\x07red\x1b[31m", "\\x1b]0;title\\x07red\\x1b[31m"),
])
def test_a_line_another_party_wrote_is_shown_escaped_and_without_a_workflow_command(line, shown):
    assert shown_line(line) == shown


def test_a_line_another_party_wrote_is_capped():
    said = shown_line("x" * 300_000)
    assert len(said) < 400 and said.endswith("(299700 more characters)")


def test_an_env_value_with_a_line_break_is_refused_before_any_node_is_asked(workspace):
    proc = run_in_process(["serve", "check", "img@sha256:" + "0" * 64, "--node", "a=127.0.0.1",
                           "-e", "A=1\nB=2"], workspace)
    assert proc.returncode == 2 and "--env A=…: the value holds a line break" in proc.stderr, proc.stderr
