"""The pinned cuobjdump: NVIDIA's wheel (`tools.cuobjdump` in the lock) for this host, fetched
into the store like every input, its binary kept at `$ENGINEBUILD_HOME/tools/<sha256>/`.

`device_code(path)` lists the SASS (cubins) and PTX a binary carries, for any target
architecture (an aarch64 library is read on an x86_64 host). No GPU is needed.
"""

from __future__ import annotations

import base64
import os
import platform
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from enginebuild.errors import BuildFailed, UserError
from enginebuild.io import proc
from enginebuild.io.files import temp_path, write_atomic
from enginebuild.io.http import Http
from enginebuild.io.progress import output
from enginebuild.io.store import Store, sha256_file
from enginebuild.kernels import fatbin
from enginebuild.kernels.archs import Arch, parse_code
from enginebuild.lock.pins import ToolPin
from enginebuild.sources.pyindex import find_file

_LINE = re.compile(r"(?P<kind>ELF|PTX) file\s+\d+:\s+\S*?\.(?P<code>sm_[0-9]{2,3}[af]?)\.(?:cubin|ptx)\s*$")
BINARY = "nvidia/cu13/bin/cuobjdump"


@dataclass(frozen=True)
class DeviceCode:
    sass: tuple[Arch, ...]
    ptx: tuple[Arch, ...]
    ptx_isa: tuple[tuple[Arch, tuple[int, int]], ...] = ()  # each PTX entry's ISA version, where read

    def isa_of(self, code: Arch) -> tuple[int, int] | None:
        """The newest ISA version among the PTX entries for `code` (None: not read)."""
        found = [isa for arch, isa in self.ptx_isa if arch == code]
        return max(found) if found else None


def _recorded_sha256(zipped: zipfile.ZipFile, filename: str) -> str:
    """The binary's sha256 as the wheel's RECORD lists it (hex)."""
    record = next((n for n in zipped.namelist() if n.endswith(".dist-info/RECORD")), None)
    if record is not None:
        for line in zipped.read(record).decode().splitlines():
            path, _, rest = line.partition(",")
            if path == BINARY and rest.startswith("sha256="):
                digest = rest.split(",", 1)[0][len("sha256="):]
                return base64.urlsafe_b64decode(digest + "=" * (-len(digest) % 4)).hex()
    raise BuildFailed(f"{filename}: its RECORD lists no sha256 for {BINARY}")


def _intact(binary: Path) -> bool:
    """The unpacked binary is used only while it hashes to what the wheel recorded for it; a
    damaged one is removed (and said so), and unpacked again from the verified wheel."""
    stamp = binary.with_name("cuobjdump.sha256")
    try:
        recorded = stamp.read_text().strip()
    except OSError:
        return False
    if binary.is_file() and os.access(binary, os.X_OK) and sha256_file(binary) == recorded:
        return True
    output().say(f"  warning: {binary} does not hash to the wheel's record of it; unpacking it again")
    binary.unlink(missing_ok=True)
    return False


class Cuobjdump:
    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def from_pin(cls, pin: ToolPin, store: Store, http: Http | None = None) -> Cuobjdump:
        machine = platform.machine()
        wheel = pin.for_machine(machine)
        if wheel is None:
            raise UserError(f"the lock pins {pin.name} {pin.version} for {', '.join(m for m, _ in pin.files)}, "
                            f"not for this host ({machine})")
        folder = store.home / "tools" / wheel.sha256
        binary = folder / "cuobjdump"
        if _intact(binary):
            return cls(binary)
        http = http or Http()
        archive = store.fetch(http, [wheel.url], wheel.sha256, wheel.filename, wheel.size,
                              alternatives=lambda: find_file(http, wheel.index, wheel.name, wheel.filename,
                                                             wheel.sha256))
        folder.mkdir(parents=True, exist_ok=True)
        tmp = temp_path(folder, "cuobjdump", "tmp")
        try:
            with zipfile.ZipFile(archive) as zipped:
                recorded = _recorded_sha256(zipped, wheel.filename)
                with zipped.open(BINARY) as source, open(tmp, "xb") as sink:
                    shutil.copyfileobj(source, sink)
            if sha256_file(tmp) != recorded:
                raise BuildFailed(f"{wheel.filename}: {BINARY} does not hash to what the wheel's RECORD says")
            os.chmod(tmp, 0o755)
            write_atomic(folder / "cuobjdump.sha256", recorded.encode())
            os.replace(tmp, binary)
        except KeyError:
            raise BuildFailed(f"{wheel.filename} has no {BINARY}") from None
        finally:
            tmp.unlink(missing_ok=True)
        return cls(binary)

    def device_code(self, path: Path) -> DeviceCode:
        """The SASS and PTX a binary carries. Read from the fat binary's entry headers, which keep
        family targets and PTX ISA versions (fatbin.py); cuobjdump's listing where they cannot be
        read, which names family cubins as plain ones and says nothing of ISA versions."""
        with open(path, "rb") as handle:
            found = fatbin.entries(handle)
        if found:
            return DeviceCode(tuple(sorted({e.arch for e in found if not e.ptx})),
                              tuple(sorted({e.arch for e in found if e.ptx})),
                              tuple(sorted({(e.arch, e.version) for e in found if e.ptx})))
        return self.listed(path)

    def listed(self, path: Path) -> DeviceCode:
        result = proc.run([self.path, "--list-elf", "--list-ptx", path], check=False, what="cuobjdump")
        text = result.out + result.err
        if result.returncode != 0 and "does not contain device code" not in text:
            raise BuildFailed(f"cuobjdump could not read {path}: {text.strip()[-400:]}")
        sass: list[Arch] = []
        ptx: list[Arch] = []
        for line in result.out.splitlines():
            match = _LINE.search(line.strip())
            if match:
                code = parse_code(match["code"])
                if code is not None:
                    (sass if match["kind"] == "ELF" else ptx).append(code)
        return DeviceCode(tuple(sorted(set(sass))), tuple(sorted(set(ptx))))
