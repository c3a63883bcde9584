"""CUDA architectures: what a spec declares (`12.1a`, `12.0`, `12.0f`, `9.0a+PTX`) and which
device code satisfies it, following NVIDIA's compatibility rules:

- SASS (a cubin) for `sm_XY` runs on compute capability X.Z for Z >= Y (same major);
  arch-specific SASS (`sm_XYa`) runs only on exactly X.Y; family SASS (`sm_XYf`) on X.Z, Z >= Y.
- PTX for `compute_XY` can be compiled by the driver (JIT) for any capability >= X.Y;
  `compute_XYa` only for exactly X.Y; `compute_XYf` for X.Z, Z >= Y; and only by a driver
  whose CUDA version knows the PTX's ISA version (core/cudacompat.py).

A declared `12.1a` therefore needs `sm_121a` SASS: GB10's native FP4 kernels are compiled
for arch-specific targets only, and a binary without them falls back at run time. With JIT
allowed (`cuda-verify.jit`), PTX that can be compiled for 12.1a is accepted instead. A
declared `+PTX` also requires that PTX.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_DECLARED = re.compile(r"(?P<major>[0-9]{1,2})\.(?P<minor>[0-9])(?P<suffix>[af]?)(?P<ptx>\+PTX)?")
_CODE = re.compile(r"(?:sm|compute)_(?P<digits>[0-9]{2,3})(?P<suffix>[af]?)")


@dataclass(frozen=True, order=True)
class Arch:
    major: int
    minor: int
    suffix: str = ""  # "", "a" (arch-specific) or "f" (family)

    @property
    def sass(self) -> str:
        return f"sm_{self.major}{self.minor}{self.suffix}"

    @property
    def ptx(self) -> str:
        return f"compute_{self.major}{self.minor}{self.suffix}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{self.suffix}"


@dataclass(frozen=True)
class Declared:
    arch: Arch
    with_ptx: bool = False

    def __str__(self) -> str:
        return f"{self.arch}{'+PTX' if self.with_ptx else ''}"


def parse_declared(text: str) -> Declared:
    match = _DECLARED.fullmatch(text.strip())
    if not match:
        raise ValueError(f"not a CUDA arch: {text!r} (expected such as 12.1a)")
    return Declared(Arch(int(match["major"]), int(match["minor"]), match["suffix"]), bool(match["ptx"]))


def parse_code(name: str) -> Arch | None:
    """`sm_121a` or `compute_90` -> Arch; None for anything else."""
    match = _CODE.fullmatch(name)
    if not match:
        return None
    digits = match["digits"]
    return Arch(int(digits[:-1]), int(digits[-1]), match["suffix"])


def runs_on(code: Arch, target: Arch) -> bool:
    """Whether code built for `code` runs on a device of `target` (SASS rules; PTX uses jit_on)."""
    if code.suffix == "a":
        return (code.major, code.minor) == (target.major, target.minor)
    if target.suffix == "a" and code == Arch(target.major, target.minor, "a"):
        return True
    return code.major == target.major and code.minor <= target.minor and (
        target.suffix != "f" or code.suffix == "f" or code.suffix == "")


def sass_satisfies(code: Arch, declared: Arch) -> bool:
    """SASS that provides what a declared arch asks for: arch-specific features need the exact
    arch-specific code; a family asks for family (or the exact arch-specific) code."""
    if declared.suffix == "a":
        return code == declared
    if declared.suffix == "f":
        return (code.suffix == "f" and code.major == declared.major and code.minor <= declared.minor) or \
            code == Arch(declared.major, declared.minor, "a")
    return runs_on(code, declared)


def jit_on(ptx: Arch, declared: Arch) -> bool:
    """PTX the driver can compile into what a declared arch asks for."""
    if ptx.suffix == "a":
        return ptx == Arch(declared.major, declared.minor, "a") and declared.suffix in ("a", "")
    if declared.suffix == "a":
        return False  # arch-specific features are only in arch-specific PTX
    if ptx.suffix == "f":
        return ptx.major == declared.major and ptx.minor <= declared.minor
    return declared.suffix != "f" and (ptx.major, ptx.minor) <= (declared.major, declared.minor)


def missing(declared: list[Declared], sass: list[Arch], ptx: list[Arch], *, jit: bool,
            loadable: Callable[[Arch], bool] = lambda ptx: True) -> list[Declared]:
    """The declared archs a binary with this device code does not serve. `loadable`: whether the
    target driver compiles a PTX entry at all (its ISA version; see core/cudacompat.py)."""
    ptx = [code for code in ptx if loadable(code)]
    out = []
    for want in declared:
        has_sass = any(sass_satisfies(code, want.arch) for code in sass)
        has_ptx = any(jit_on(code, want.arch) for code in ptx)
        served = has_sass or (jit and has_ptx)
        if want.with_ptx and not has_ptx:
            served = False
        if not served:
            out.append(want)
    return out
