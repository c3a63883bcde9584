#!/usr/bin/env python3
"""Build the kernel-verdict fixtures: one small shared library per row of BINARIES, each the
same one-kernel probe (probe.cu) compiled by a pinned nvcc from NVIDIA's PyPI wheels with
other device code (SASS, PTX, arch-specific and family targets) and a static or shared CUDA
runtime. record.py then loads each on a real GPU; tests/test_kernel_truth.py holds `verify`'s
verdicts to what the GPU did.

    python3 scripts/gpu-truth/build.py [--toolkits DIR]   # writes tests/corpus/gpu/*.so + manifest.json

The toolkits are pip-installed into DIR (default ~/.cache/enginebuild-gpu-truth) once. The
output is reproducible (nvcc with -objtemp and fixed seeds): the manifest records each
library's sha256, and a rebuild with the same pins gives the same bytes.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OUT = ROOT / "tests" / "corpus" / "gpu"

# every part of a toolkit pinned to one release: nvcc's wheel asks for its front end (crt),
# its compiler (nvvm, which writes the PTX and so its ISA version) and its runtime with >=
PARTS = ("nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-runtime")
# toolkit -> (pip requirements, nvcc path, extra include and library folders), relative to its folder
TOOLKITS = {
    "13.0": ([f"{p}==13.0.88" for p in PARTS], "nvidia/cu13/bin/nvcc", [], ["nvidia/cu13/lib"]),
    "13.2": ([f"{p}==13.2.86" for p in PARTS], "nvidia/cu13/bin/nvcc", [], ["nvidia/cu13/lib"]),
    "13.5": ([f"{p}==13.5.37" for p in PARTS], "nvidia/cu13/bin/nvcc", [], ["nvidia/cu13/lib"]),
}

# name: (toolkit, -gencode targets, cudart)
BINARIES = {
    "t135-sm90": ("13.5", ["arch=compute_90,code=sm_90"], "shared"),
    "t135-sm90a": ("13.5", ["arch=compute_90a,code=sm_90a"], "shared"),
    "t135-sm80": ("13.5", ["arch=compute_80,code=sm_80"], "shared"),
    "t135-sm89": ("13.5", ["arch=compute_89,code=sm_89"], "shared"),
    "t135-sm100": ("13.5", ["arch=compute_100,code=sm_100"], "shared"),
    "t135-sm100a": ("13.5", ["arch=compute_100a,code=sm_100a"], "shared"),
    "t135-sm100f": ("13.5", ["arch=compute_100f,code=sm_100f"], "shared"),
    "t135-sm120": ("13.5", ["arch=compute_120,code=sm_120"], "shared"),
    "t135-sm121a": ("13.5", ["arch=compute_121a,code=sm_121a"], "shared"),
    "t135-ptx80": ("13.5", ["arch=compute_80,code=compute_80"], "shared"),
    "t135-ptx90": ("13.5", ["arch=compute_90,code=compute_90"], "shared"),
    "t135-ptx90a": ("13.5", ["arch=compute_90a,code=compute_90a"], "shared"),
    "t135-sm90-ptx90": ("13.5", ["arch=compute_90,code=[sm_90,compute_90]"], "shared"),
    "t135-sm80-ptx80": ("13.5", ["arch=compute_80,code=[sm_80,compute_80]"], "shared"),
    "t135-sm90-static": ("13.5", ["arch=compute_90,code=sm_90"], "static"),
    "t135-ptx80-static": ("13.5", ["arch=compute_80,code=compute_80"], "static"),
    "t132-sm90": ("13.2", ["arch=compute_90,code=sm_90"], "shared"),
    "t132-ptx80": ("13.2", ["arch=compute_80,code=compute_80"], "shared"),
    "t132-ptx90": ("13.2", ["arch=compute_90,code=compute_90"], "shared"),
    "t130-sm90": ("13.0", ["arch=compute_90,code=sm_90"], "shared"),
    "t130-ptx80": ("13.0", ["arch=compute_80,code=compute_80"], "shared"),
    "t130-ptx90": ("13.0", ["arch=compute_90,code=compute_90"], "shared"),
    "t130-ptx90a": ("13.0", ["arch=compute_90a,code=compute_90a"], "shared"),
    "t130-ptx120": ("13.0", ["arch=compute_120,code=compute_120"], "shared"),
    "t130-sm80-ptx80": ("13.0", ["arch=compute_80,code=[sm_80,compute_80]"], "shared"),
    "t130-sm100f": ("13.0", ["arch=compute_100f,code=sm_100f"], "shared"),
    "t130-ptx80-static": ("13.0", ["arch=compute_80,code=compute_80"], "static"),
}


def install(toolkits: Path, version: str) -> Path:
    folder = toolkits / version
    if not (folder / TOOLKITS[version][1]).exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--no-deps", "--target",
                        str(folder), *TOOLKITS[version][0]], check=True)
    return folder


def build(name: str, toolkits: Path, scratch: Path) -> Path:
    version, gencodes, cudart = BINARIES[name]
    folder = install(toolkits, version)
    _, nvcc, includes, libs = TOOLKITS[version]
    flags = [a for g in gencodes for a in ("-gencode", g)]
    paths = [f"-I{folder / i}" for i in includes] + [f"-L{folder / lib}" for lib in libs]
    obj, out = scratch / f"{name}.o", OUT / f"{name}.so"
    linkable = scratch / f"lib-{version}"  # the wheels ship libcudart.so.N only; the linker asks for libcudart.so
    if not linkable.exists():
        linkable.mkdir()
        for lib in libs:
            for found in (folder / lib).glob("libcudart.so.*"):
                (linkable / "libcudart.so").symlink_to(found)
    paths.append(f"-L{linkable}")
    env = dict(os.environ, PATH=f"{folder / Path(nvcc).parent}:{os.environ['PATH']}")
    subprocess.run([str(folder / nvcc), "-c", "-objtemp", f"-frandom-seed={name}", "-Xcompiler",
                    f"-fPIC,-ffile-prefix-map={HERE}=.", *paths, *flags, "-o", str(obj), str(HERE / "probe.cu")],
                   check=True, env=env, cwd=HERE)
    subprocess.run([str(folder / nvcc), "-shared", "-cudart", cudart, *paths, *flags, "-o", str(out), str(obj)],
                   check=True, env=env, cwd=scratch)
    subprocess.run(["strip", "--strip-unneeded", str(out)], check=True)  # device code stays; size goes down
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toolkits", type=Path, default=Path.home() / ".cache" / "enginebuild-gpu-truth")
    parser.add_argument("names", nargs="*", help="only these (default: every binary)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    manifest = {}
    scratch = Path(tempfile.gettempdir()) / "enginebuild-gpu-truth-build"  # one path: nvlink writes it in
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        for name in args.names or BINARIES:
            path = build(name, args.toolkits, scratch)
            version, gencodes, cudart = BINARIES[name]
            manifest[name] = {"file": path.name, "toolkit": version, "nvcc": TOOLKITS[version][0][0],
                              "gencode": gencodes, "cudart": cudart,
                              "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "size": path.stat().st_size}
            print(f"{name}: {path.stat().st_size} bytes")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not args.names:
        (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
