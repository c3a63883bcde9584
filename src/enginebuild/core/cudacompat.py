"""NVIDIA's compatibility tables, kept as data, and the rules verify applies with them.

Sources:
- PTX ISA versions by CUDA release: the PTX ISA guide's "Release Notes: PTX ISA release
  history" (docs.nvidia.com/cuda/parallel-thread-execution, #release-notes). A driver
  compiles PTX up to the ISA of the CUDA version it implements; newer PTX fails with
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222). Observed on an H100 with driver 580 (CUDA 13.0):
  ISA 9.0 ran, 9.2 and 9.5 gave 222 (tests/corpus/gpu-outcomes.json).
- Driver branches by CUDA version: the CUDA Toolkit release notes, "CUDA Toolkit and
  Corresponding Driver Versions" (the minimum driver of each toolkit's GA release).
- Minor version compatibility (CUDA Compatibility guide, docs.nvidia.com/deploy/cuda-compatibility):
  a CUDA runtime or library of major version M runs on any driver of CUDA M.0 or later, the
  driver's own version; features beyond the driver's (and PTX it cannot compile) are not.
  Observed: runtimes 13.2 and 13.5 ran SASS kernels on the CUDA 13.0 driver.
"""

from __future__ import annotations

import re

# PTX ISA version -> the first CUDA release that compiles it
PTX_ISA_CUDA = {
    (7, 0): (11, 0), (7, 1): (11, 1), (7, 2): (11, 2), (7, 3): (11, 3), (7, 4): (11, 4), (7, 5): (11, 5),
    (7, 6): (11, 6), (7, 7): (11, 7), (7, 8): (11, 8), (8, 0): (12, 0), (8, 1): (12, 1), (8, 2): (12, 2),
    (8, 3): (12, 3), (8, 4): (12, 4), (8, 5): (12, 5), (8, 6): (12, 7), (8, 7): (12, 8), (8, 8): (12, 9),
    (9, 0): (13, 0), (9, 1): (13, 1), (9, 2): (13, 2), (9, 3): (13, 3), (9, 4): (13, 4), (9, 5): (13, 5),
}

# driver branch -> the CUDA version it implements
DRIVER_CUDA = {
    525: (12, 0), 530: (12, 1), 535: (12, 2), 545: (12, 3), 550: (12, 4), 555: (12, 5), 560: (12, 6),
    570: (12, 8), 575: (12, 9), 580: (13, 0),
}

CUDA_LIBRARY = re.compile(r"lib(?P<name>cudart|cublas|cublasLt|cufft|curand|cusparse|cusolver|nvrtc|nvJitLink|"
                          r"nvrtc-builtins|cupti)\.so\.(?P<major>\d+)(?:\.(?P<minor>\d+))?(?:\.\d+)*")


YEAR_VERSIONS = 2000


def driver_cuda(branch: int) -> tuple[int, int]:
    """The CUDA version of a driver branch (580 -> 13.0); KeyError for an unknown one."""
    return DRIVER_CUDA[branch]


def ptx_loads(isa: tuple[int, int], cuda: tuple[int, int]) -> bool:
    """Whether a driver of CUDA version `cuda` compiles PTX of this ISA version."""
    needs = PTX_ISA_CUDA.get(isa)
    return needs is not None and needs <= cuda


def library_version(basename: str) -> tuple[str, int, int | None] | None:
    """(library, major, minor) of a CUDA runtime library file name (libcudart.so.13.0.96), or None."""
    match = CUDA_LIBRARY.fullmatch(basename)
    if not match or int(match["major"]) >= YEAR_VERSIONS:
        # CUPTI numbers its releases by year (libcupti.so.2026.2.0): no CUDA version to read there
        return None
    return match["name"], int(match["major"]), int(match["minor"]) if match["minor"] else None


def library_problem(basename: str, cuda: tuple[int, int]) -> str | None:
    """Why a CUDA library cannot run on a driver of CUDA `cuda` (minor version compatibility), or None."""
    found = library_version(basename)
    if found is None:
        return None
    name, major, minor = found
    if major > cuda[0]:
        shown = f"{major}.{minor}" if minor is not None else str(major)
        return (f"lib{name} {shown} needs a driver of CUDA {major}.0 or later; the target driver implements "
                f"CUDA {cuda[0]}.{cuda[1]}")
    return None
