#!/usr/bin/env python3
"""Record what TurboQuant's CUDA-graph check prints on a real GPU, for the wheel built without
the patch and the wheel built with it (tests/corpus/turboquant-gpu-outcomes.json).

    # here: the wheels enginebuild built (patched: the image's component; unpatched:
    # --set 'components.turboquant.patches=[]') and the checks, into one folder
    python3 scripts/gpu-truth/turboquant.py prepare FOLDER PATCHED.whl UNPATCHED.whl
    # on the GPU machine (its own PyTorch; nothing fetched): each wheel in a folder of its own
    python3 scripts/gpu-truth/turboquant.py run FOLDER > tests/corpus/turboquant-gpu-outcomes.json

The check is the one the patch carries (patches/turboquant/0001-….checks.yaml), run as `image`
would run it in a container where a GPU is: the same code, by the machine's interpreter, with the
wheel on its path. The record names the GPU, the driver, PyTorch, each wheel's sha256 and the
sha256 of the check's definition, so a changed check or a rebuilt wheel makes it stale, loudly
(tests/test_turboquant_truth.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHEEL = "turboquant-0.1.0-py3-none-any.whl"  # the name the component's build gives it (pip reads tags from it)


def definition_sha(check: dict) -> str:
    return hashlib.sha256(json.dumps(check, sort_keys=True).encode()).hexdigest()


def prepare(folder: Path, patched: Path, unpatched: Path) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from enginebuild.recipe.patchchecks import read_checks

    folder.mkdir(parents=True, exist_ok=True)
    checks = read_checks(ROOT / "patches/turboquant/0001-cache-qjl-powers-per-device.patch",
                         "turboquant/0001-cache-qjl-powers-per-device.patch", ROOT)
    for variant, wheel in (("patched", patched), ("unpatched", unpatched)):  # each under its own file name
        (folder / variant).mkdir(exist_ok=True)
        shutil.copy(wheel, folder / variant / WHEEL)
    (folder / "checks.json").write_text(json.dumps([c.definition() for c in checks], indent=2))


def run(folder: Path) -> dict:
    checks = json.loads((folder / "checks.json").read_text())
    query = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
    gpu, driver, capability = (part.strip() for part in query.split(","))
    torch = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__, torch.version.cuda)"],
                           capture_output=True, text=True, check=True).stdout.split()
    record = {"gpu": gpu, "driver": driver, "compute_capability": capability, "torch": torch[0], "cuda": torch[1],
              "python": sys.version.split()[0], "runs": []}
    for variant in ("unpatched", "patched"):
        wheel = folder / variant / WHEEL
        target = Path(tempfile.mkdtemp(prefix=f"tq-{variant}-"))
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                        "--target", str(target), str(wheel)], check=True)
        for check in checks:
            done = subprocess.run([sys.executable, "-c", check["python"]], capture_output=True, text=True,
                                  env={**os.environ, **dict(check["env"]),
                                       "PYTHONPATH": ":".join(filter(None, (str(target),
                                                                            os.environ.get("PYTHONPATH"))))},
                                  timeout=check["timeout"])
            record["runs"].append({"variant": variant, "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
                                   "check": check["name"], "definition_sha256": definition_sha(check),
                                   "status": done.returncode, "output": done.stdout.strip(),
                                   "stderr_tail": done.stderr.strip().splitlines()[-3:]})
    return record


if __name__ == "__main__":
    if sys.argv[1:2] == ["prepare"]:
        prepare(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    elif sys.argv[1:2] == ["run"]:
        print(json.dumps(run(Path(sys.argv[2])), indent=2))
    else:
        sys.exit(__doc__)
