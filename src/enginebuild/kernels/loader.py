"""Where the image's dynamic loader finds a library, modelled on glibc's ld.so and read from the
file table (filetable.py), so an arm64 image is judged on an x86_64 host.

The search for a DT_NEEDED name without a slash, in the loader's order: the object's DT_RPATH
(when it has no DT_RUNPATH), LD_LIBRARY_PATH of the image's configuration, its DT_RUNPATH, the
folders of /etc/ld.so.conf (with its includes: what ldconfig puts in ld.so.cache), then the
default folders (the platform's multiarch folders, /lib, /usr/lib). `$ORIGIN` is the folder
of the object, by the path it was found at and by its real path; `$LIB` and `$PLATFORM` are
the platform's. A candidate counts only if it is an ELF file of the same machine and class
(the loader passes over others).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from enginebuild.kernels.dynamic import MACHINES, Linkage
from enginebuild.kernels.filetable import FileTable

TRIPLETS = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
CPUS = {"amd64": "x86_64", "arm64": "aarch64"}


@dataclass(frozen=True)
class Found:
    name: str
    path: str  # the real path of the library the loader takes


class Loader:
    def __init__(self, table: FileTable, platform: str, library_path: str = ""):
        self.table = table
        self.arch = platform.split("/")[1]
        self.machine = MACHINES[self.arch]
        triplet = TRIPLETS[self.arch]
        self.library_path = tuple(p for p in library_path.split(":") if p)
        self.conf = tuple(self._conf("/etc/ld.so.conf", set()))
        self.defaults = (f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib") + \
            (("/lib64", "/usr/lib64") if self.arch == "amd64" else ())

    def _conf(self, path: str, seen: set[str]) -> list[str]:
        found = self.table.file(path)
        if found is None or found[0] in seen:
            return []
        seen.add(found[0])
        out: list[str] = []
        for raw in found[1].text.splitlines():
            line = raw.split("#", 1)[0].strip()
            if line.startswith("include"):
                for pattern in line.split()[1:]:
                    pattern = pattern if pattern.startswith("/") else posixpath.join("/etc", pattern)
                    for include in sorted(p for p, _ in self.table.matching(pattern)):
                        out += self._conf(include, seen)
            elif line.startswith("/"):
                out.append(line.rstrip("/"))
        return out

    def fits(self, linkage: Linkage | None, wide: bool) -> bool:
        return linkage is not None and linkage.machine == self.machine and linkage.wide == wide

    def of_platform(self, linkage: Linkage) -> bool:
        return self.fits(linkage, True)  # both platforms are 64-bit

    def find(self, name: str, path: str, linkage: Linkage) -> Found | None:
        """The library the loader takes for DT_NEEDED `name` of the object at `path`."""
        if "/" in name:
            return self._candidate(name if name.startswith("/") else "/" + name, name, linkage)
        folders = (() if linkage.runpath else self._expand(linkage.rpath, path)) + self.library_path + \
            self._expand(linkage.runpath, path) + self.conf + self.defaults
        return self._first(name, folders, linkage)

    def find_in(self, name: str, origin: str, folders: tuple[str, ...], linkage: Linkage) -> Found | None:
        """`name` in another object's DT_RPATH folders (`origin`: that object's path)."""
        return self._first(name, self._expand(folders, origin), linkage)

    def _first(self, name: str, folders: tuple[str, ...], linkage: Linkage) -> Found | None:
        for folder in dict.fromkeys(folders):
            found = self._candidate(f"{folder}/{name}", name, linkage)
            if found is not None:
                return found
        return None

    def interpreter(self, linkage: Linkage) -> Found | None:
        return self._candidate(linkage.interp, linkage.interp, linkage)

    def _candidate(self, path: str, name: str, linkage: Linkage) -> Found | None:
        found = self.table.file(path)
        if found is None or not self.fits(found[1].linkage, linkage.wide):
            return None
        return Found(name, found[0])

    def _expand(self, folders: tuple[str, ...], path: str) -> tuple[str, ...]:
        origins = [posixpath.dirname(path)]
        real = self.table.real(path)
        if real and posixpath.dirname(real) not in origins:
            origins.append(posixpath.dirname(real))
        out: list[str] = []
        for folder in folders:
            folder = folder.replace("$LIB", f"lib/{TRIPLETS[self.arch]}").replace("${LIB}", f"lib/{TRIPLETS[self.arch]}")
            folder = folder.replace("$PLATFORM", CPUS[self.arch]).replace("${PLATFORM}", CPUS[self.arch])
            if "$ORIGIN" in folder or "${ORIGIN}" in folder:
                out += [posixpath.normpath(folder.replace("${ORIGIN}", o).replace("$ORIGIN", o)) for o in origins]
            elif folder.startswith("/"):
                out.append(posixpath.normpath(folder))
        return tuple(out)
