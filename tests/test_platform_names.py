"""One platform type (core/platforms.py): what each other party calls the platforms a spec may
name, read from one place."""
from __future__ import annotations

import re

import pytest

from enginebuild.core.platforms import PATTERN, Platform, platform_hint


@pytest.mark.parametrize("text, machine, debian, qemu, triplet, elf, oci", [
    ("linux/amd64", "x86_64", "amd64", "x86_64", "x86_64-linux-gnu", 62, {"os": "linux", "architecture": "amd64"}),
    ("linux/arm64", "aarch64", "arm64", "aarch64", "aarch64-linux-gnu", 183,
     {"os": "linux", "architecture": "arm64", "variant": "v8"}),
    ("linux/arm/v7", "armv7", "armhf", "arm", "arm-linux-gnueabihf", 40,
     {"os": "linux", "architecture": "arm", "variant": "v7"}),
    ("linux/ppc64le", "ppc64le", "ppc64el", "ppc64le", "powerpc64le-linux-gnu", 21,
     {"os": "linux", "architecture": "ppc64le"}),
    ("linux/386", "386", "i386", "i386", "i386-linux-gnu", 3, {"os": "linux", "architecture": "386"}),
])
def test_each_platform_a_spec_may_name_has_every_name_other_parties_use(text, machine, debian, qemu, triplet, elf, oci):
    assert re.fullmatch(PATTERN, text)
    platform = Platform.parse(text)
    assert str(platform) == text
    assert (platform.machine, platform.debian, platform.qemu, platform.triplet, platform.elf_machine, platform.oci()) \
        == (machine, debian, qemu, triplet, elf, oci)
    assert platform.named_by(oci) and not platform.named_by({**oci, "os": "windows"})


def test_a_machine_name_and_an_index_entry_map_to_the_platform_and_a_bad_one_is_refused():
    assert Platform.of_machine("aarch64") == Platform.parse("linux/arm64") == Platform.of_machine("arm64")
    assert Platform.of_machine("x86_64") == Platform("linux", "amd64")
    assert Platform.parse("linux/arm64").named_by({"os": "linux", "architecture": "arm64"})  # any variant
    assert not Platform.parse("linux/arm/v7").named_by({"os": "linux", "architecture": "arm", "variant": "v6"})
    for bad in ("linux", "linux/", "linux/ARM64", "a/b/c/d", "linux/arm64 "):
        with pytest.raises(ValueError, match="not a platform"):
            Platform.parse(bad)
    assert platform_hint("linux/aarch64") == "did you mean linux/arm64?"
    assert platform_hint("linux/arm64") is None
