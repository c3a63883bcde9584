"""The runtime closure of an image: every executable and shared library of the layers enginebuild
made has its interpreter and each DT_NEEDED library resolved inside the image, the way the
image's own loader would (loader.py), from the files, not by running them.

What a file-by-file search gets wrong is modelled, not listed by hand:
- The loader takes a needed name from the objects already loaded before it searches, and
  loads an object's needs breadth first: a library that needs `libXau-….so` without a RUNPATH
  to it finds the one its loader (an object that needs both, with a RUNPATH) loaded first.
  Counted as "in process" when an object that loads the binary also loads that name.
- In a Python process, an object under site-packages also resolves against the libraries the
  imports before it have loaded: the loader matches a loaded object by its SONAME, so vLLM's
  `_C.abi3.so` finds torch's `libc10.so` that `import torch` loaded. Counted as "in process"
  when a library of that name (SONAME or file name) is under the same site-packages folder and
  something loads it: another binary's own search finds it (torch's `_C` through its RUNPATH),
  or the Python code of its own package names it (the CUTLASS DSL's `libcute_dsl_runtime.so`,
  opened with ctypes).
- A plugin is a shared library nothing links (no DT_NEEDED names it), not a Python extension
  module, whose name a library beside it carries (the string it passes to dlopen): nvshmem's
  transports, cuFile's RDMA layer. What it lacks is listed as optional, not failed: it is
  opened only when configured, and its opener handles the failure.
- Files for another machine (aarch64 stubs in an amd64 image) are listed, not checked; CUDA
  cubins (ELF files for the GPU, FlashInfer's thousands) are not the loader's: passed over.
- Libraries the NVIDIA container toolkit mounts from the host driver are listed apart
  (DRIVER: the compute and utility capabilities, mounted by default; DRIVER_ON_REQUEST: the
  video and graphics ones, mounted only when NVIDIA_DRIVER_CAPABILITIES asks).
Anything else unresolved fails, naming the binary and the library, unless the spec skips the
binary with a reason (`runtime-check.skip`).
"""

from __future__ import annotations

import fnmatch
import mmap
import posixpath
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.kernels.dynamic import Linkage
from enginebuild.kernels.filetable import Entry, FileTable
from enginebuild.kernels.loader import Loader
from enginebuild.kernels.scan import Skip
from enginebuild.wire import JsonDoc

# libnvidia-container's library lists (src/nvc_info.c), by name before ".so"
DRIVER = frozenset({"libcuda", "libcudadebugger", "libnvidia-ml", "libnvidia-cfg", "libnvidia-nscq",
                    "libnvidia-opencl", "libnvidia-gpucomp", "libnvidia-ptxjitcompiler",
                    "libnvidia-fatbinaryloader", "libnvidia-allocator", "libnvidia-compiler", "libnvidia-pkcs11",
                    "libnvidia-pkcs11-openssl3", "libnvidia-nvvm"})
DRIVER_ON_REQUEST = frozenset({"libvdpau_nvidia", "libnvidia-encode", "libnvidia-opticalflow", "libnvcuvid",
                               "libnvidia-eglcore", "libnvidia-glcore", "libnvidia-tls", "libnvidia-glsi",
                               "libnvidia-fbc", "libnvidia-ifr", "libnvidia-rtcore", "libnvoptix",
                               "libGLX_nvidia", "libEGL_nvidia", "libGLESv2_nvidia", "libGLESv1_CM_nvidia",
                               "libnvidia-glvkspirv", "libnvidia-cbl"})
EM_CUDA = 190
SITE = re.compile(r"^(.*?/(?:site|dist)-packages)/")
EXTENSION = re.compile(r"\.(?:cpython-[^./]+|abi3|pypy[^./]*)\.so$")


@dataclass(frozen=True)
class Unresolved:
    path: str
    name: str
    layer: str = ""
    note: str = ""  # a hint (a package that ships it), a skip's reason, or the plugin's opener

    def to_json(self) -> JsonDoc:
        return {"path": self.path, "library": self.name, **({"from": self.layer} if self.layer else {}),
                **({"note": self.note} if self.note else {})}


@dataclass
class Closure:
    image: str
    platform: str
    checked: int = 0  # executables and shared libraries of the platform judged
    resolved: int = 0  # DT_NEEDED entries the loader finds
    in_process: int = 0  # DT_NEEDED entries a Python process has loaded already
    missing: list[Unresolved] = field(default_factory=list)
    driver: list[Unresolved] = field(default_factory=list)
    optional: list[Unresolved] = field(default_factory=list)  # what plugins lack
    skipped: list[Unresolved] = field(default_factory=list)
    damaged: list[Unresolved] = field(default_factory=list)  # files the loader would refuse to map
    other_platform: list[str] = field(default_factory=list)
    layers: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.missing and not self.damaged

    def said(self) -> list[str]:
        """What a build says of it when it passed."""
        return [self.lines()[-1] + f" ({self.checked} binaries)"]

    def to_json(self) -> JsonDoc:
        return {"image": self.image, "platform": self.platform, "ok": self.ok, "checked": self.checked,
                "resolved": self.resolved, "in_process": self.in_process, "layers": self.layers, "seconds": round(self.seconds, 2),
                "missing": [u.to_json() for u in self.missing], "driver": [u.to_json() for u in self.driver],
                "optional": [u.to_json() for u in self.optional], "skipped": [u.to_json() for u in self.skipped],
                "damaged": [u.to_json() for u in self.damaged],
                "other_platform": self.other_platform}

    def lines(self) -> list[str]:
        out = [f"{self.image} ({self.platform}): {self.checked} executable(s) and librar(ies) checked, "
               f"{self.resolved} needed librar(ies) resolved, {self.in_process} in a Python process"]
        drivers = sorted({u.name for u in self.driver})
        if drivers:
            out.append(f"  from the host driver (the NVIDIA container toolkit mounts them): {', '.join(drivers)}")
        if self.optional:
            out.append(f"  plugins opened only when configured, lacking {len(self.optional)} librar(ies): "
                       + "; ".join(f"{u.path}: {u.name}" for u in self.optional[:5])
                       + (" …" if len(self.optional) > 5 else ""))
        if self.other_platform:
            out.append(f"  {len(self.other_platform)} file(s) for another machine, not checked "
                       f"(first: {self.other_platform[0]})")
        for path, found in _by_binary(self.skipped).items():
            out.append(f"  skipped {path} (lacks {', '.join(u.name for u in found)}): {found[0].note}")
        for item in self.damaged:
            out.append(f"  DAMAGED {item.path}: {item.note}")
        for path, found in _by_binary(self.missing).items():
            hints = "; ".join(u.note for u in found if u.note)
            out.append(f"  MISSING {', '.join(u.name for u in found)}, needed by {path}" + (f" ({hints})" if hints else ""))
        out.append(f"{self.image} ({self.platform}): runtime closure {'ok' if self.ok else 'FAILED'} "
                   f"in {self.seconds:.1f}s")
        return out


def _by_binary(found: list[Unresolved]) -> dict[str, list[Unresolved]]:
    out: dict[str, list[Unresolved]] = {}
    for item in found:
        out.setdefault(item.path, []).append(item)
    return out


def check_closure(image: str, platform: str, table: FileTable, ours: set[str], library_path: str,
                  skip: tuple[Skip, ...] = (), read: Callable[[Entry], Path | None] | None = None) -> Closure:
    """`ours`: the names of the layers whose binaries are judged (the rest is searched only);
    `read`: the stored layer that holds an entry's bytes (to look for a plugin's opener)."""
    start = time.monotonic()
    loader = Loader(table, platform, library_path)
    result = Closure(image, platform)
    linked = sorted(table.linked())
    graph = _Graph(table, loader)
    found = _searched(result, linked, ours, loader, graph)
    result.resolved += graph.inherit(found)
    providers = _site_providers(table, loader, linked)
    needed_anywhere = {n for _, e in linked if e.linkage for n in e.linkage.needed}
    python = _PythonCode(table, read)
    for path, lacking in found.items():
        entry = table.entries[path]
        left = _left(result, path, entry, lacking, graph, providers, python)
        if not left:
            continue
        rule = next((s for s in skip if fnmatch.fnmatch(path, s.pattern)), None)
        opener = None if rule else _opener(table, path, entry, needed_anywhere, read)
        for name in left:
            if rule is not None:
                result.skipped.append(Unresolved(path, name, entry.layer, rule.why))
            elif opener is not None:
                result.optional.append(Unresolved(path, name, entry.layer, f"a plugin {opener} opens"))
            else:
                result.missing.append(Unresolved(path, name, entry.layer, _hint(name)))
    result.seconds = time.monotonic() - start
    return result


def _searched(result: Closure, linked: list[tuple[str, Entry]], ours: set[str], loader: Loader,
              graph: _Graph) -> dict[str, list[str]]:
    """Each judged binary's needed names the loader's own search leaves unresolved (the search of
    every binary recorded in `graph`); binaries of another platform and damaged ones noted."""
    found: dict[str, list[str]] = {}
    for path, entry in linked:
        linkage = entry.linkage
        assert linkage is not None
        judged = entry.layer in ours
        if linkage.machine == EM_CUDA:
            continue  # a CUDA cubin: device code the driver loads, not the loader
        if not loader.of_platform(linkage):
            if judged:
                result.other_platform.append(path)
            continue
        if linkage.damaged:
            if judged:
                result.damaged.append(Unresolved(path, "", entry.layer, linkage.damaged))
            continue
        lacking = graph.search(path, linkage)
        if judged:
            if linkage.interp and loader.interpreter(linkage) is None:
                lacking.insert(0, linkage.interp)
            result.checked += 1
            result.resolved += len(linkage.needed) - len(lacking)
            found[path] = lacking
    return found


def _left(result: Closure, path: str, entry: Entry, lacking: list[str], graph: _Graph,
          providers: dict[str, dict[str, str]], python: _PythonCode) -> list[str]:
    """What of `lacking` no process that loads `path` has: the driver's libraries and those loaded
    beside it (or by the Python package that holds it) are counted, the rest returned."""
    matched = SITE.match(path)
    site = matched.group(1) if matched else ""
    beside = graph.loaded_beside(path) if lacking else set()
    left: list[str] = []
    for name in lacking:
        provider = providers.get(site, {}).get(name) if site else None
        if _driver(name):
            result.driver.append(Unresolved(path, name, entry.layer))
        elif name in beside or (provider is not None and provider != path and
                                (provider in graph.searched or python.names(site, provider))):
            result.in_process += 1
        else:
            left.append(name)
    return left


class _Graph:
    """Which binary's search finds which library: who loads whom."""

    def __init__(self, table: FileTable, loader: Loader):
        self.table, self.loader = table, loader
        self.loads: dict[str, set[str]] = {}  # binary (real path) -> the libraries its search finds
        self.loaded_by: dict[str, set[str]] = {}
        self.searched: set[str] = set()  # libraries some binary's search finds: a process can have them loaded

    def _add(self, path: str, library: str) -> None:
        real = self.table.real(path) or path
        self.searched.add(library)
        self.loads.setdefault(real, set()).add(library)
        self.loaded_by.setdefault(library, set()).add(real)

    def search(self, path: str, linkage: Linkage) -> list[str]:
        """The needed names the object's own search does not find."""
        lacking = []
        order = self.loader.search_order(path, linkage)
        for name in linkage.needed:
            hit = self.loader.find(name, path, linkage, order)
            if hit is None:
                lacking.append(name)
            else:
                self._add(path, hit.path)
        return lacking

    def inherit(self, found: dict[str, list[str]]) -> int:
        """Resolve, in place, what an object without DT_RUNPATH finds through the DT_RPATH of the
        objects that load it (glibc searches the loaders' RPATHs up to the executable), until
        nothing more is found; the count found."""
        count, changed = 0, True
        while changed:
            changed = False
            for path, lacking in found.items():
                entry = self.table.entries[path]
                if not lacking or entry.linkage is None or entry.linkage.runpath:
                    continue
                orders = [self.loader.rpath_order(a, loader.linkage.rpath)
                          for a in self.ancestors(self.table.real(path) or path)
                          if (loader := self.table.entries.get(a)) is not None and loader.linkage is not None
                          and loader.linkage.rpath]
                for name in list(lacking):
                    for order in orders:
                        hit = self.loader.first(name, order, entry.linkage)
                        if hit is not None:
                            self._add(path, hit.path)
                            lacking.remove(name)
                            count, changed = count + 1, True
                            break
        return count

    def ancestors(self, path: str) -> set[str]:
        out, todo = set(), [path]
        while todo:
            for parent in self.loaded_by.get(todo.pop(), ()):
                if parent not in out:
                    out.add(parent)
                    todo.append(parent)
        return out

    def loaded_beside(self, path: str) -> set[str]:
        """The names (SONAME and file name) of what is loaded in every process that loads `path`
        through the loader: the loader takes a needed name from the objects already loaded before
        it searches, and loads an object's needs breadth first, so what the objects that load
        `path` load is there when its own needs are looked up."""
        real = self.table.real(path) or path
        ancestors = self.ancestors(real)
        seen, todo = set(ancestors), list(ancestors)
        while todo:
            for child in self.loads.get(todo.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        seen.discard(real)
        names = set()
        for loaded in seen:
            entry = self.table.entries.get(loaded)
            names.add(posixpath.basename(loaded))
            if entry is not None and entry.linkage is not None and entry.linkage.soname:
                names.add(entry.linkage.soname)
        return names


class _PythonCode:
    """Whether the Python code of a library's own package (its top-level folder in site-packages)
    names it (the argument it gives ctypes or torch.ops.load_library): then importing that
    package loads it, before what needs it."""

    def __init__(self, table: FileTable, read: Callable[[Entry], Path | None] | None):
        self.table, self.read = table, read
        self.known: dict[str, bool] = {}

    def names(self, site: str, library: str) -> bool:
        """`library`'s file name up to `.so` (`libcute_dsl_runtime.so`) in its package's Python code."""
        if library in self.known:
            return self.known[library]
        package = site + "/" + library[len(site) + 1:].split("/", 1)[0] + "/"
        needle = (posixpath.basename(library).split(".so", 1)[0] + ".so").encode()
        spans: dict[Path, list[tuple[int, int]]] = {}
        for path, entry in self.table.entries.items():
            if entry.at is not None and path.startswith(package) and path.endswith(".py") and self.read:
                layer = self.read(entry)
                if layer is not None:
                    spans.setdefault(layer, []).append((entry.at[1], entry.at[2]))
        self.known[library] = any(_carries_any(layer, found, needle) for layer, found in spans.items())
        return self.known[library]


def _site_providers(table: FileTable, loader: Loader, linked: list[tuple[str, Entry]]) -> dict[str, dict[str, str]]:
    """Per site-packages folder, the libraries in it by SONAME and file name (their real paths)."""
    providers: dict[str, dict[str, str]] = {}
    for path, entry in linked:
        site = SITE.match(path)
        if site and entry.linkage and loader.of_platform(entry.linkage):
            names = providers.setdefault(site.group(1), {})
            real = table.real(path) or path
            names.setdefault(posixpath.basename(path), real)
            if entry.linkage.soname:
                names.setdefault(entry.linkage.soname, real)
    return providers


def _driver(name: str) -> bool:
    stem = name.split(".so", 1)[0]
    return stem in DRIVER or stem in DRIVER_ON_REQUEST


def _opener(table: FileTable, path: str, entry: Entry, needed: set[str],
            read: Callable[[Entry], Path | None] | None) -> str | None:
    """The library beside a plugin that names it (dlopen's argument), when it is a plugin."""
    linkage = entry.linkage
    base = posixpath.basename(path)
    if linkage is None or linkage.interp or read is None or EXTENSION.search(base) or \
            (SITE.match(path) and base.endswith(".so") and not base.startswith("lib")):
        return None
    if base in needed or (linkage.soname and linkage.soname in needed):
        return None
    folder = posixpath.dirname(path)
    stem = base.split(".so", 1)[0].encode() + b".so"
    for other, sibling in table.linked():
        if posixpath.dirname(other) != folder or other == path or sibling.at is None:
            continue
        layer = read(sibling)
        if layer is not None and _carries(layer, sibling.at[1], sibling.at[2], stem):
            return other
    return None


def _carries(layer: Path, offset: int, size: int, needle: bytes) -> bool:
    return _carries_any(layer, [(offset, size)], needle)


def _carries_any(layer: Path, spans: list[tuple[int, int]], needle: bytes) -> bool:
    with open(layer, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        return any(view.find(needle, offset, offset + size) >= 0 for offset, size in spans)


def _hint(name: str) -> str:
    """The package Debian would ship it in (its policy names library packages after the SONAME)."""
    match = re.match(r"^lib(.+?)\.so\.([0-9][0-9.]*)$", name)
    if not match:
        return ""
    stem, version = match.group(1).lower().replace("_", "-"), match.group(2)
    return f"in Debian: lib{stem}{'-' if stem[-1].isdigit() else ''}{version}, if it follows the library naming policy"
