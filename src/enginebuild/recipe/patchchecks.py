"""A patch's behaviour checks: `patches/<component>/<name>.checks.yaml`, beside the patch file
`<name>.patch` it belongs to (docs/patches.md). Each check is a command run in a container of
the built image (no network, no GPU unless it `needs` one, a time limit), with the output it
must print and, optionally, the output the engine prints without the patch, which is what
lets `patches check --behaviour` say whether another release still needs the fix.

    checks:
      - name: dflash-ids-only
        python: |                       # run by the image's own interpreter
          from vllm.v1.worker.gpu_model_runner import GPUModelRunner
          ...
          print(GPUModelRunner._get_eagle3_aux_layers_from_config(runner))
        expect: "(2, 17, 32, 47, 62)"   # the whole output, trailing blanks aside
        unpatched: "(1, 16, 31, 46, 61)"
      - name: capture
        run: [python3, /opt/check.py]   # or a command (a list, or a shell line)
        expect-match: "captured .*"     # a regular expression the whole output matches
        needs: [gpu]                    # reported as not run where no GPU is
        timeout: 5m
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import regex

from enginebuild.core.schema import Enum, ListOf, MapOf, OneOf, Record, Str
from enginebuild.core.yamlload import YList, YMap, load_yaml_file
from enginebuild.errors import SpecError, Where
from enginebuild.wire import JsonDoc

SUFFIX = ".checks.yaml"
NEEDS = ("gpu",)
DEFAULT_TIMEOUT_S = 120.0
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


MATCH_LIMIT_S = 2.0  # what one `expect-match` may take on one output, in enginebuild's own process


class SlowPattern(Exception):
    """A pattern that backtracked past MATCH_LIMIT_S on an output: the check fails, naming it."""


def _regex(value: str) -> str | None:
    try:
        regex.compile(value)
    except regex.error as exc:
        return f"not a regular expression: {exc}"
    return None


def _output(what: str) -> Str:
    return Str(test=lambda v: "at most 65536 characters" if len(v) > 65536 else None, what=what)


CHECK = Record({
    "name": Str(pattern=r"[a-z0-9][a-z0-9._-]{0,62}", what="a check name (lower-case letters, digits, . _ -)"),
    "python": Str(test=lambda v: "NUL bytes are not allowed" if "\x00" in v else None,
                  what="Python code, run by the image's own interpreter"),
    "run": OneOf((Str(test=lambda v: "NUL bytes are not allowed" if "\x00" in v else None, what="a shell line"),
                  ListOf(Str(what="an argument"), max_items=256)),
                 description="a command: a list (run as given) or a shell line (run by /bin/sh -c)"),
    "expect": _output("the whole output the patched engine prints"),
    "expect-match": Str(test=_regex, what="a regular expression the whole output matches"),
    "unpatched": _output("the whole output the engine prints without the patch"),
    "unpatched-match": Str(test=_regex, what="a regular expression the unpatched engine's output matches"),
    "needs": ListOf(Enum(NEEDS), unique=True),
    "timeout": Str(pattern=r"[0-9]{1,6}(?:ms|s|m|h)", what="a duration such as 2m (default 120s)"),
    "env": MapOf(Str(what="a value"), key_pattern=r"[A-Za-z_][A-Za-z0-9_]{0,127}", key_what="a variable name"),
}, required=("name",), exclusive=(("python", "run"), ("expect", "expect-match"), ("unpatched", "unpatched-match")),
    need_one_of=("python", "run"), doc="{name, python | run, expect | expect-match, unpatched, needs, timeout, env}")
SCHEMA = Record({"checks": ListOf(CHECK, max_items=64)}, required=("checks",), doc="{checks: [...]}",
                description="the behaviour checks of one patch (patches/<component>/<name>.checks.yaml)")


@dataclass(frozen=True)
class PatchCheck:
    patch: str  # the patch's name, relative to patches/
    name: str
    python: str | None
    run: tuple[str, ...] | str | None
    expect: str | None
    expect_match: str | None
    unpatched: str | None
    unpatched_match: str | None
    needs: tuple[str, ...]
    timeout_s: float
    env: tuple[tuple[str, str], ...]
    where: Where

    def argv(self, python: Sequence[str]) -> list[str]:
        """The command a container runs; `python`: the interpreter and its options."""
        if self.python is not None:
            return [*python, "-c", self.python]
        if isinstance(self.run, str):
            return ["/bin/sh", "-c", self.run]
        return list(self.run or ())

    def shown(self) -> str:
        """The command, as a message names it (the first line of its code)."""
        if self.python is not None:
            first = next((line for line in self.python.splitlines() if line.strip()), "")
            return f"python: {first.strip()[:80]}" + (" ..." if self.python.strip().count("\n") else "")
        return self.run if isinstance(self.run, str) else " ".join(self.run or ())

    def wanted(self) -> str:
        return self.expect if self.expect is not None else f"a match of /{self.expect_match}/"

    def patched_by(self, out: str) -> bool:
        """Whether `out` is what the patched engine prints."""
        return _matches(out, self.expect, self.expect_match)

    def unpatched_by(self, out: str) -> bool | None:
        """Whether `out` is what the engine prints without the patch (None: the check does not say)."""
        if self.unpatched is None and self.unpatched_match is None:
            return None
        return _matches(out, self.unpatched, self.unpatched_match)

    def definition(self) -> JsonDoc:
        """What the check is, for keys and records (where it was read is not part of it)."""
        return {"patch": self.patch, "name": self.name, "python": self.python,
                "run": list(self.run) if isinstance(self.run, tuple) else self.run, "expect": self.expect,
                "expect-match": self.expect_match, "unpatched": self.unpatched,
                "unpatched-match": self.unpatched_match, "needs": list(self.needs), "timeout": self.timeout_s,
                "env": [list(e) for e in self.env]}


def normal(out: str) -> str:
    """Output as checks compare it: line ends unified, trailing blanks of each line and of the whole removed."""
    return "\n".join(line.rstrip() for line in out.replace("\r\n", "\n").split("\n")).strip("\n")


def _matches(out: str, exact: str | None, pattern: str | None) -> bool:
    if exact is not None:
        return normal(out) == normal(exact)
    if pattern is None:
        return False
    text = normal(out)
    try:
        return regex.fullmatch(pattern, text, regex.DOTALL, timeout=MATCH_LIMIT_S) is not None
    except TimeoutError:
        raise SlowPattern(f"matching /{pattern[:80]}/ against its {len(text)} characters of output took over "
                          f"{MATCH_LIMIT_S:.0f} s and was stopped (a pattern that backtracks: anchor or simplify it)"
                          ) from None


def checks_path(patch: Path) -> Path:
    return patch.with_name(patch.name.removesuffix(".patch") + SUFFIX)


def read_checks(patch: Path, name: str, root: Path) -> tuple[PatchCheck, ...]:
    """The checks beside `patch` (named `name` under patches/), or none when it has no such file."""
    path = checks_path(patch)
    if not path.is_file():
        return ()
    display = f"patches/{name.removesuffix('.patch')}{SUFFIX}"
    tree = load_yaml_file(path, display, root)
    SCHEMA.check(tree, "", Where(display), partial=False)
    out = []
    items = tree["checks"]
    for i, item in enumerate(items):
        where = items.at(i) if isinstance(items, YList) else Where(display)
        out.append(_check(name, item, where))
    names = [c.name for c in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise SpecError(Where(display), "checks", f"two checks are named {dup!r}")
    return tuple(out)


def _check(patch: str, item: JsonDoc, where: Where) -> PatchCheck:  # checked by the schema
    timeout = item.get("timeout")
    seconds = DEFAULT_TIMEOUT_S
    if timeout:
        number = re.match(r"[0-9]+", timeout)
        assert number is not None
        seconds = int(number.group()) * _UNITS[timeout[number.end():]]
    run = item.get("run")
    env = item.get("env") or {}
    node_where = item.where if isinstance(item, YMap) else where
    return PatchCheck(patch, str(item["name"]), item.get("python"), tuple(run) if isinstance(run, list) else run,
                      item.get("expect"), item.get("expect-match"), item.get("unpatched"),
                      item.get("unpatched-match"), tuple(item.get("needs") or ()), seconds,
                      tuple(sorted((str(k), str(v)) for k, v in env.items())), node_where or where)
