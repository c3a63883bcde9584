"""Where the image's dynamic loader finds a library, modelled on glibc's ld.so and read from the
file table (filetable.py), so an arm64 image is judged on an x86_64 host.

The search for a DT_NEEDED name without a slash, in the loader's order: the object's DT_RPATH
(when it has no DT_RUNPATH), LD_LIBRARY_PATH of the image's configuration, its DT_RUNPATH, the
folders of /etc/ld.so.conf (with its includes: what ldconfig puts in ld.so.cache), then the
default folders (the platform's multiarch folders, /lib, /usr/lib). `$ORIGIN` is the folder
of the object, by the path it was found at and by its real path; `$LIB` and `$PLATFORM` are
the platform's. A candidate counts only if it is an ELF file of the same machine and class
(the loader passes over others).

An object's search order is made once (`search_order`: each folder by its real path, its first
place), and a name is looked up among the folders that hold a file of that name, not folder by
folder: the cost is the object's folders plus its names, never their product (a library with
thousands of RUNPATH folders and NEEDED names is judged as fast as it is read).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from enginebuild.core.platforms import Platform
from enginebuild.kernels.dynamic import Linkage
from enginebuild.kernels.filetable import FileTable

Order = dict[str, int]  # a search's folders (real paths) -> their first place in it



@dataclass(frozen=True)
class Found:
    name: str
    path: str  # the real path of the library the loader takes


class Loader:
    def __init__(self, table: FileTable, platform: str, library_path: str = ""):
        self.table = table
        self.platform = Platform.parse(platform)
        self.machine = self.platform.elf_machine
        triplet = self.platform.triplet
        self.library_path = tuple(p for p in library_path.split(":") if p)
        self.conf = tuple(self._conf("/etc/ld.so.conf", set()))
        self.defaults = (f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib", "/usr/lib") + \
            (("/lib64", "/usr/lib64") if self.platform.arch == "amd64" else ())
        self._holders: dict[str, list[str]] | None = None
        self._real: dict[str, str | None] = {}

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

    def search_order(self, path: str, linkage: Linkage) -> Order:
        """Where the object at `path` has a needed name searched, in the loader's order."""
        return self.order((() if linkage.runpath else self._expand(linkage.rpath, path)) + self.library_path
                          + self._expand(linkage.runpath, path) + self.conf + self.defaults)

    def rpath_order(self, origin: str, folders: tuple[str, ...]) -> Order:
        """Another object's DT_RPATH folders (`origin`: that object's path), as a search order."""
        return self.order(self._expand(folders, origin))

    def order(self, folders: tuple[str, ...]) -> Order:
        out: Order = {}
        for place, folder in enumerate(folders):
            if folder not in self._real:
                self._real[folder] = self.table.real(folder)
            real = self._real[folder]
            if real is not None and real not in out:
                out[real] = place
        return out

    def find(self, name: str, path: str, linkage: Linkage, order: Order | None = None) -> Found | None:
        """The library the loader takes for DT_NEEDED `name` of the object at `path` (`order`: its
        `search_order`, when the caller has it)."""
        if "/" in name:
            return self._candidate(name if name.startswith("/") else "/" + name, name, linkage)
        return self.first(name, order if order is not None else self.search_order(path, linkage), linkage)

    def first(self, name: str, order: Order, linkage: Linkage) -> Found | None:
        """`name` in the first folder of `order` that holds a library of it the loader takes."""
        places = sorted((order[folder], folder) for folder in self.holders().get(name, ()) if folder in order)
        for _, folder in places:
            found = self._candidate(f"{folder}/{name}", name, linkage)
            if found is not None:
                return found
        return None

    def holders(self) -> dict[str, list[str]]:
        """File name -> the folders (as the table has them: real paths) that hold an entry of it."""
        if self._holders is None:
            self._holders = {}
            for path in self.table.entries:
                folder, _, base = path.rpartition("/")
                self._holders.setdefault(base, []).append(folder or "/")
        return self._holders

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
            lib, cpu = f"lib/{self.platform.triplet}", self.platform.machine
            folder = folder.replace("$LIB", lib).replace("${LIB}", lib)
            folder = folder.replace("$PLATFORM", cpu).replace("${PLATFORM}", cpu)
            if "$ORIGIN" in folder or "${ORIGIN}" in folder:
                out += [posixpath.normpath(folder.replace("${ORIGIN}", o).replace("$ORIGIN", o)) for o in origins]
            elif folder.startswith("/"):
                out.append(posixpath.normpath(folder))
        return tuple(out)
