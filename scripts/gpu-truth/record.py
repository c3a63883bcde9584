#!/usr/bin/env python3
"""Record what a real NVIDIA GPU does with each kernel-verdict fixture (tests/corpus/gpu):
load the library, launch its kernel (eb_probe) and keep the CUDA runtime's error code,
with the GPU, its compute capability and the driver's version. Run on a machine with a GPU:

    python3 scripts/gpu-truth/record.py --cudart DIR > tests/corpus/gpu-outcomes.json

DIR holds TOOLKIT/libcudart.so.N for the libraries built with a shared runtime (each is
loaded with its own toolkit's runtime, as an image would ship it). Each library is loaded
in a process of its own, so one runtime's state never leaks into the next.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parents[1] / "tests" / "corpus" / "gpu"

PROBE = """
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
print(json.dumps({"error": lib.eb_probe(), "runtime": lib.eb_runtime_version()}))
"""


def driver() -> dict[str, object]:
    cuda = ctypes.CDLL("libcuda.so.1")
    version = ctypes.c_int()
    cuda.cuDriverGetVersion(ctypes.byref(version))
    query = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
    name, release, capability = (part.strip() for part in query.split(","))
    return {"gpu": name, "driver": release, "driver_cuda": f"{version.value // 1000}.{version.value % 1000 // 10}",
            "compute_capability": capability}


def probe(path: Path, libs: Path | None) -> dict[str, object]:
    env = dict(os.environ)
    if libs is not None:
        env["LD_LIBRARY_PATH"] = f"{libs}:{env.get('LD_LIBRARY_PATH', '')}"
    done = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, env=env,
                          timeout=120)
    if done.returncode != 0:
        return {"error": None, "loaded": False, "message": (done.stderr or done.stdout).strip()[-300:]}
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "loaded": True}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cudart", type=Path, required=True)
    args = parser.parse_args()
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    rows = {}
    for name, entry in sorted(manifest.items()):
        libs = args.cudart / entry["toolkit"] if entry["cudart"] == "shared" else None
        rows[name] = {"sha256": entry["sha256"], **probe(FIXTURES / entry["file"], libs)}
        print(f"{name}: {rows[name]}", file=sys.stderr)
    print(json.dumps({"machine": driver(), "outcomes": rows}, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
