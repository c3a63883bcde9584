"""A platform, as OCI names it (`linux/arm64`, `linux/arm/v7`), and what every other party calls
the same machine: the kernel's `uname -m` (Python's `platform_machine` marker, QEMU's binfmt
entries), Debian's architecture, the ELF header's `e_machine`, the GNU triplet of its library
folders, the OCI config's architecture and variant. One type, parsed once, so that no other
module splits a platform string or keeps its own table of names. Standard library only."""

from __future__ import annotations

import platform as host
import re
from dataclasses import dataclass

PATTERN = r"linux/(?:amd64|arm64|arm/v[5-8]|ppc64le|s390x|riscv64|386)"
# what other tools and kernels call a platform (uname -m, Debian, Rust), and the one OCI names
ALIASES = {"aarch64": "arm64", "arm64/v8": "arm64", "x86_64": "amd64", "x86-64": "amd64", "x64": "amd64",
           "i386": "386", "i686": "386", "armhf": "arm/v7", "armv7": "arm/v7", "armv7l": "arm/v7"}
_MACHINES = {"arm64": "aarch64", "amd64": "x86_64", "ppc64le": "ppc64le", "s390x": "s390x"}
_QEMU = {"arm64": "aarch64", "amd64": "x86_64", "arm": "arm", "386": "i386"}
_DEBIAN = {"arm/v7": "armhf", "arm/v6": "armel", "arm/v5": "armel", "386": "i386", "ppc64le": "ppc64el"}
_ELF = {"amd64": 62, "arm64": 183, "386": 3, "arm": 40, "ppc64le": 21, "s390x": 22, "riscv64": 243}  # EM_*
_TRIPLETS = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu", "arm/v7": "arm-linux-gnueabihf",
             "arm/v6": "arm-linux-gnueabi", "arm/v5": "arm-linux-gnueabi", "386": "i386-linux-gnu",
             "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu", "riscv64": "riscv64-linux-gnu"}
_FROM_MACHINE = {"x86_64": "amd64", "aarch64": "arm64"}


@dataclass(frozen=True)
class Platform:
    os: str
    arch: str
    variant: str = ""

    @classmethod
    def parse(cls, text: str) -> Platform:
        """`os/arch[/variant]`; a ValueError for anything else (a spec's platforms are checked
        against PATTERN where they are read, with a hint: `hint`)."""
        parts = text.split("/")
        if len(parts) not in (2, 3) or not all(re.fullmatch(r"[a-z0-9_]+", p) for p in parts):
            raise ValueError(f"{text!r} is not a platform such as linux/arm64")
        return cls(*parts)

    @classmethod
    def of_machine(cls, machine: str) -> Platform:
        """The Linux platform of a machine as `uname -m` (or an engine's `Architecture`) names it."""
        return cls("linux", _FROM_MACHINE.get(machine, machine))

    @classmethod
    def host(cls) -> Platform:
        """This machine's platform."""
        return cls.of_machine(host.machine())

    def __str__(self) -> str:
        return f"{self.os}/{self.arch}" + (f"/{self.variant}" if self.variant else "")

    @property
    def _arch_variant(self) -> str:
        return f"{self.arch}/{self.variant}" if self.variant else self.arch

    @property
    def machine(self) -> str:
        """What `uname -m` says on it (Python's `platform_machine`, wheels' platform tags)."""
        joined = self.arch + self.variant
        return _MACHINES.get(joined, joined)

    @property
    def qemu(self) -> str:
        """The name of QEMU's user-mode emulator, and of its binfmt_misc entry, for it."""
        return _QEMU.get(self.arch, self.arch)

    @property
    def debian(self) -> str:
        """Debian's name of its architecture (an archive's binary-ARCH folders)."""
        return _DEBIAN.get(self._arch_variant, self.arch)

    @property
    def elf_machine(self) -> int:
        """The `e_machine` of its ELF files (0, EM_NONE, for a platform not in PATTERN)."""
        return _ELF.get(self.arch, 0)

    @property
    def triplet(self) -> str:
        """The GNU triplet of its multiarch library folders (Debian's `$LIB` is lib/TRIPLET)."""
        return _TRIPLETS.get(self._arch_variant, f"{self.machine}-linux-gnu")

    def named_by(self, entry: dict[str, object]) -> bool:
        """Whether an OCI index entry's `platform` names this platform (any variant, unless this
        platform has one)."""
        return entry.get("os") == self.os and entry.get("architecture") == self.arch and \
            (not self.variant or entry.get("variant") == self.variant)

    def oci(self) -> dict[str, str]:
        """As an OCI index and config name it (arm64 is variant v8 unless said otherwise)."""
        out = {"os": self.os, "architecture": self.arch}
        if self.variant or self.arch == "arm64":
            out["variant"] = self.variant or "v8"
        return out


HOST = Platform.host()


def platform_hint(value: str) -> str | None:
    """`did you mean linux/arm64?` for linux/aarch64, aarch64, arm64 and the like."""
    text = value.strip().lower()
    arch = text.removeprefix("linux/")
    arch = ALIASES.get(arch, arch)
    guess = f"linux/{arch}"
    return f"did you mean {guess}?" if guess != value and re.fullmatch(PATTERN, guess) else None
