"""Installing a wheel into a layer on the host, with pypa's `installer`: the files pip would
write (RECORD, INSTALLER, console scripts with the image's interpreter), no bytecode, no pip
and no container. The layer's bytes depend only on the wheel and the install scheme."""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.sources import WheelFile

from enginebuild.errors import BuildFailed
from enginebuild.io.tars import TarWriter, write_folder
from enginebuild.io.unpack import Budget


def scheme(site_packages: str) -> dict[str, str]:
    """The install scheme for a site-packages folder (/usr/local/lib/python3.12/dist-packages)."""
    prefix = site_packages.split("/lib/", 1)[0] if "/lib/" in site_packages else "/usr/local"
    version = next((p for p in site_packages.split("/") if p.startswith("python3")), "python3")
    return {"purelib": site_packages, "platlib": site_packages, "scripts": f"{prefix}/bin",
            "data": prefix, "headers": f"{prefix}/include/{version}"}


def install_wheel(wheel: Path, filename: str, site_packages: str, interpreter: str, writer: TarWriter) -> None:
    """Install the wheel stored at `wheel` (named `filename`, which the installer reads tags from)."""
    with zipfile.ZipFile(wheel) as zipped:  # what its members declare, before anything is written
        Budget(filename, wheel.stat().st_size).take(sum(i.file_size for i in zipped.infolist()))
    stage = Path(tempfile.mkdtemp(prefix="enginebuild-wheel-"))
    named = Path(tempfile.mkdtemp(prefix="enginebuild-wheel-name-")) / filename
    named.symlink_to(wheel)
    wheel = named
    try:
        paths = {k: str(stage / v.lstrip("/")) for k, v in scheme(site_packages).items()}
        destination = SchemeDictionaryDestination(paths, interpreter=interpreter, script_kind="posix",
                                                  bytecode_optimization_levels=())
        try:
            with WheelFile.open(wheel) as source:
                install(source, destination, additional_metadata={"INSTALLER": b"enginebuild\n"})
        except Exception as exc:  # installer raises plain exceptions for bad wheels
            raise BuildFailed(f"cannot install {wheel.name}: {exc}") from None
        write_folder(writer, stage)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(named.parent, ignore_errors=True)
