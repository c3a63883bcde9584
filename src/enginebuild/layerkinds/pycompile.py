"""Run by the image's own interpreter, in a container of the chain a bytecode layer is made on
(layerkinds/bytecode.py sends this file's text there; nothing of enginebuild is importable in it).

    python3 pycompile.py ROOT VERSION

ROOT/src/NNNN/ holds the `.py` files of one layer below at their paths in the image. Each folder
is compiled by a process of its own (PYTHONHASHSEED=0, no site), its files in sorted order, so
what a layer's bytecode holds depends only on that layer's sources and the interpreter: marshal's
output depends on what the process compiled before (which objects are shared), and a set's order
on the hash seed. As many folders are compiled at once as the container has CPUs, the largest
first; how many never changes what a folder's process writes. Each `.pyc` is hash-based (PEP 552,
checked): its validity is the source's hash, never a time stamp, so the layers' normalised times
cannot make it stale, and a source a later layer replaces is compiled again by Python itself at
import. It is written to
ROOT/out/NNNN/<the path Python looks for it at>, named in tracebacks by the source's path in the
image. One JSON line per folder says what was compiled and what could not be (a syntax the
interpreter does not read: left to Python, as pip leaves it)."""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor


def compile_folder(root: str, folder: str) -> dict[str, object]:
    base = os.path.join(root, "src", folder)
    out = os.path.join(root, "out", folder)
    sources = []
    for top, dirs, files in os.walk(base):
        dirs.sort()
        sources += [os.path.join(top, name) for name in files if name.endswith(".py")]
    compiled, failed = 0, []
    for source in sorted(sources):
        path = "/" + os.path.relpath(source, base)
        target = out + importlib.util.cache_from_source(path, optimization="")
        try:
            py_compile.compile(source, cfile=target, dfile=path, doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH, optimize=0)
            compiled += 1
        except (py_compile.PyCompileError, SyntaxError, ValueError, UnicodeError, RecursionError, MemoryError):
            failed.append(path)
    return {"folder": folder, "compiled": compiled, "failed": len(failed), "first_failed": failed[:3]}


def main() -> int:
    root, version = sys.argv[1], sys.argv[2]
    found = "{}.{}".format(*sys.version_info[:2])
    if found != version or sys.implementation.cache_tag is None:
        print(json.dumps({"error": f"the interpreter is Python {found} ({sys.implementation.cache_tag}), "
                                   f"the plan says {version}"}))
        return 3
    # the image's variables stay (a library path its interpreter needs); none of Python's own
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = "0"
    folders = sorted(os.listdir(os.path.join(root, "src")))

    def compiled(folder: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-S", "-s", "-B", __file__, "--folder", root, folder],
                              env=env, stdout=subprocess.PIPE, check=False)

    largest_first = sorted(folders, key=lambda folder: -source_bytes(os.path.join(root, "src", folder)))
    with ThreadPoolExecutor(max_workers=max(1, min(len(folders), cpus()))) as pool:
        running = {folder: pool.submit(compiled, folder) for folder in largest_first}
        for folder in folders:  # reported in the folders' order, whichever ends first
            done = running[folder].result()
            if done.returncode != 0:
                for other in running.values():
                    other.cancel()
                print(json.dumps({"error": f"compiling folder {folder} stopped with status {done.returncode}"}))
                return 4
            sys.stdout.write(done.stdout.decode())
    return 0


def source_bytes(base: str) -> int:
    return sum(os.path.getsize(os.path.join(top, name))
               for top, _, files in os.walk(base) for name in files if name.endswith(".py"))


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


if __name__ == "__main__":
    if sys.argv[1] == "--folder":
        print(json.dumps(compile_folder(sys.argv[2], sys.argv[3])))
        sys.exit(0)
    sys.exit(main())
