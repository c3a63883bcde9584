#!/usr/bin/env python3
"""Run the demo image's CUDA kernel on a real GPU, as the image would run it: the image's
filesystem (`image demo --output DIR`, for the GPU's arch) as the root of a chroot, the host
driver's libcuda.so.1 put where the NVIDIA container toolkit mounts it, and the image's own
Python and dynamic loader loading /opt/enginebuild/lib/libdemo_cuda.so. The kernel (RMS
normalisation) is launched through the library's entry point on memory from the driver API,
and compared with the same arithmetic on the CPU. Run as root on a machine with a GPU:

    python3 scripts/gpu-truth/image.py ROOTFS.tar.gz > tests/corpus/image-gpu-outcomes.json

Prints one JSON document: the GPU, the driver, the library's sha256, whether it loaded (and
the loader's error if not), the launch's CUDA error and the largest difference from the CPU.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

LIBRARY = "/opt/enginebuild/lib/libdemo_cuda.so"
# what the image's python3 runs inside the chroot: nothing but the standard library
CHECK = r'''
import ctypes, json, math, random
out = {}
try:
    lib = ctypes.CDLL("LIBRARY")
except OSError as exc:
    print(json.dumps({"loaded": False, "load_error": str(exc)}))
    raise SystemExit(0)
cuda = ctypes.CDLL("libcuda.so.1")
def check(what, code):
    if code != 0:
        raise SystemExit(f"{what}: CUDA driver error {code}")
check("cuInit", cuda.cuInit(0))
device, context = ctypes.c_int(), ctypes.c_void_p()
check("cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(device), 0))
check("cuDevicePrimaryCtxRetain", cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
check("cuCtxSetCurrent", cuda.cuCtxSetCurrent(context))
rows, cols, eps = 8, 1000, 1e-6
random.seed(1)
x = [random.uniform(-2, 2) for _ in range(rows * cols)]
w = [random.uniform(0.5, 1.5) for _ in range(cols)]
Floats = ctypes.c_float * (rows * cols)
def device_copy(values):
    pointer = ctypes.c_uint64()
    check("cuMemAlloc", cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(4 * len(values))))
    host = (ctypes.c_float * len(values))(*values)
    check("cuMemcpyHtoD", cuda.cuMemcpyHtoD_v2(pointer, host, ctypes.c_size_t(4 * len(values))))
    return pointer
d_in, d_w, d_out = device_copy(x), device_copy(w), device_copy([0.0] * (rows * cols))
lib.demo_launch_rmsnorm.argtypes = [ctypes.c_uint64] * 3 + [ctypes.c_int, ctypes.c_int, ctypes.c_float]
error = lib.demo_launch_rmsnorm(d_out, d_in, d_w, rows, cols, eps)
check("cuCtxSynchronize", cuda.cuCtxSynchronize())
got = Floats()
check("cuMemcpyDtoH", cuda.cuMemcpyDtoH_v2(got, d_out, ctypes.c_size_t(4 * rows * cols)))
worst = 0.0
for r in range(rows):
    row = x[r * cols:(r + 1) * cols]
    scale = 1.0 / math.sqrt(sum(v * v for v in row) / cols + eps)
    for i in range(cols):
        worst = max(worst, abs(got[r * cols + i] - row[i] * scale * w[i]))
print(json.dumps({"loaded": True, "launch_error": error, "max_abs_diff": worst, "rows": rows, "cols": cols}))
'''


def gpu() -> dict[str, str]:
    query = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
    name, release, capability = (part.strip() for part in query.split(","))
    return {"gpu": name, "driver": release, "compute_capability": capability}


def host_libcuda() -> Path:
    found = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    for line in found.splitlines():
        if line.strip().startswith("libcuda.so.1 ") and ("x86-64" in line or "AArch64" in line):
            return Path(line.rsplit("=>", 1)[1].strip()).resolve()
    raise SystemExit("no libcuda.so.1 on this machine")


def main() -> int:
    archive = Path(sys.argv[1])
    root = Path(tempfile.mkdtemp(prefix="image-gpu-"))
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(root, filter="fully_trusted")
        # where the toolkit mounts the driver's library: the loader's default folder of the platform
        target = root / "usr/lib/x86_64-linux-gnu/libcuda.so.1"
        shutil.copy(host_libcuda(), target)
        mounted = []
        try:  # the driver reaches the GPU through /dev/nvidia*, and reads /proc and /sys
            for folder in ("dev", "proc", "sys"):
                (root / folder).mkdir(exist_ok=True)
                subprocess.run(["mount", "--bind", f"/{folder}", str(root / folder)], check=True)
                mounted.append(root / folder)
            run = subprocess.run(["chroot", str(root), "/usr/bin/python3", "-c", CHECK.replace("LIBRARY", LIBRARY)],
                                 capture_output=True, text=True)
        finally:
            for folder in reversed(mounted):
                subprocess.run(["umount", "-l", str(folder)], check=False)
        result = json.loads(run.stdout.strip().splitlines()[-1]) if run.returncode == 0 and run.stdout.strip() \
            else {"loaded": None, "failed": run.stderr.strip()[-2000:]}
        library = hashlib.sha256((root / LIBRARY.lstrip("/")).read_bytes()).hexdigest()
        print(json.dumps({"machine": gpu(), "image": archive.name, "library": LIBRARY, "sha256": library,
                          **result}, indent=1, sort_keys=True))
    finally:  # never through a bind mount left behind: the host's /dev would go with it
        if not any(os.path.ismount(root / folder) for folder in ("dev", "proc", "sys")):
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
