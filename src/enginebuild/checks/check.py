"""What every check of a built image is to the build that runs it: a name its lines begin with,
a run that gives a judgement (`ok`, and `lines()`, whose last says it in one line), what a failure
stops the build with, and what a pass says. The byte-reading checks (kernels, runtime closure)
and those run in containers of the image (imports, the patches' behaviour) are all `Check`s; the
build runs them in checks/afterbuild.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from enginebuild.errors import BuildFailed


class Judged(Protocol):
    """A check's judgement: kernels/image.Verdict, kernels/closure.Closure, checks/imports.Imports,
    checks/behaviour.Behaviour."""

    @property
    def ok(self) -> bool: ...

    def lines(self) -> list[str]: ...

    def said(self) -> list[str]:
        """What a build says of it when it passed, the last line its verdict."""


@dataclass(frozen=True)
class Check:
    name: str  # what its lines begin with: kernels, runtime, python, patches
    run: Callable[[], Judged]
    failed: str  # the first line of the failure that stops a build (the judgement's lines follow)
    hint: str
    indent: str = "    "  # before each of the judgement's lines in a failure
    what: str = ""  # what it runs, as "not run" names it (a check run in a container of the image)

    def verdict(self, judged: Judged) -> list[str]:
        """What a passing judgement says; a failing one stops the build, naming what failed."""
        if not judged.ok:
            raise BuildFailed(f"{self.failed}:\n{self.indent}" + f"\n{self.indent}".join(judged.lines()), hint=self.hint)
        return judged.said()
