#!/usr/bin/env python3
"""Ground truth for compile caches, on a machine with an NVIDIA GPU and PyTorch (not a test the
suite runs: CI has no GPU). A 4-block fp16 MLP under `torch.compile(mode="max-autotune")`:

1. cold: a fresh process, empty Inductor and Triton cache folders: the compile and its first call
   timed (the model built and CUDA started before the clock; the whole process timed as well);
2. its folders captured by enginebuild's own code (serving/compilecache.py), under this machine's
   record (GPU, compute capability, driver, CUDA, torch, Triton, Python);
3. warm: another fresh process, new empty folders, the capture restored into them, the same
   compile and first call, timed; its output compared with the cold run's (fp16 tolerance);
4. a capture recorded under another GPU is refused by the restore, naming the field.

Writes one JSON document (the figures and the versions) to the path given, for tests/corpus/.

    PYTHONPATH=src python3 scripts/compile-cache-truth.py OUT.json
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from enginebuild.serving.compilecache import Refused, capture, record_of, restore  # noqa: E402

CHILD = r"""
import json, sys, time
began = time.perf_counter()
import torch
torch.manual_seed(0)
blocks = []
for hidden in (16384, 14336, 12288, 11008):  # MLP blocks of four models' widths: up, GELU, down
    blocks += [torch.nn.Linear(4096, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, 4096)]
model = torch.nn.Sequential(*blocks).half().cuda().eval()
x = torch.randn(256, 4096, dtype=torch.float16, device="cuda")
torch.cuda.synchronize()
start = time.perf_counter()  # the compile and its first call: what a cache saves
compiled = torch.compile(model, mode="max-autotune")
with torch.no_grad():
    y = compiled(x)
torch.cuda.synchronize()
seconds = time.perf_counter() - start
torch.save(y.cpu(), sys.argv[1])
from torch._dynamo.utils import counters
hits = {k: v for k, v in counters["inductor"].items() if "cache" in k}
print(json.dumps({"seconds": seconds, "process_s": time.perf_counter() - began, "cache_counters": hits}))
"""


COUNTERS: dict[str, dict[str, int]] = {}  # Inductor's cache counters of each run, by its name


def facts() -> dict[str, str]:
    code = ("import json, platform, torch, triton; p = torch.cuda.get_device_properties(0); "
            "print(json.dumps({'gpu': p.name, 'compute_capability': f'{p.major}.{p.minor}', "
            "'cuda': torch.version.cuda, 'torch': torch.__version__, 'triton': triton.__version__, "
            "'python': platform.python_version()}))")
    found = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                      check=True).stdout)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True)
    found["driver"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 else ""
    found["arch_list"] = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    return record_of(found)


def compile_once(folders: dict[str, Path], out: Path) -> tuple[float, float]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(folders["inductor"]),
           "TRITON_CACHE_DIR": str(folders["triton"])}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out)], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the compile failed:\n{proc.stderr[-4000:]}")
    said = json.loads(proc.stdout.strip().splitlines()[-1])
    COUNTERS[out.stem] = said.get("cache_counters", {})
    return float(said["seconds"]), float(said["process_s"])


def folders_in(base: Path) -> dict[str, Path]:
    out = {"inductor": base / "inductor", "triton": base / "triton"}
    for path in out.values():
        path.mkdir(parents=True)
    return out


def main() -> int:
    import torch

    target = Path(sys.argv[1])
    work = Path(tempfile.mkdtemp(prefix="compile-cache-"))
    here = facts()
    cold_folders = folders_in(work / "cold")
    cold, cold_process = compile_once(cold_folders, work / "cold.pt")
    archive = work / "cache.tar.gz"
    captured = capture(cold_folders, here, archive)
    again = capture(cold_folders, here, work / "again.tar.gz")  # the same files: the same bytes
    warm_folders = folders_in(work / "warm")
    restored = restore(archive, warm_folders, here)
    warm, warm_process = compile_once(warm_folders, work / "warm.pt")
    y_cold, y_warm = torch.load(work / "cold.pt"), torch.load(work / "warm.pt")
    close = bool(torch.allclose(y_cold.float(), y_warm.float(), rtol=1e-2, atol=1e-2))
    max_diff = float((y_cold.float() - y_warm.float()).abs().max())
    elsewhere = dict(here, gpu="NVIDIA GB10", compute_capability="12.1")
    other = capture(cold_folders, elsewhere, work / "other.tar.gz")
    try:
        restore(work / "other.tar.gz", folders_in(work / "refused"), here)
        refused = ""
    except Refused as exc:
        refused = str(exc)
    doc = {"what": "a 4-block fp16 MLP (Linear 4096->H, GELU, Linear H->4096; H 16384, 14336, 12288, 11008) "
                   "under torch.compile max-autotune, batch 256: "
                   "the compile and its first call in a fresh process, cold (empty Inductor and Triton caches) and warm "
                   "(the cold run's folders captured by serving/compilecache.py and restored into new folders)",
           "machine": here, "cold_s": round(cold, 2), "warm_s": round(warm, 2), "warm_over_cold": round(warm / cold, 3),
           "cold_process_s": round(cold_process, 2), "warm_process_s": round(warm_process, 2),
           "inductor_cache_counters": COUNTERS,
           "cache_bytes": captured.size, "cache_files": captured.files, "restored_files": restored,
           "sha256": captured.sha256, "same_bytes_captured_twice": captured.sha256 == again.sha256,
           "outputs_within_fp16_tolerance": close, "max_abs_difference": max_diff,
           "other_key_refused": refused, "other_key_sha256": other.sha256}
    target.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(json.dumps(doc, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
