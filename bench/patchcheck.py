"""(e) A patch stack checked against the ~35 MB vllm 0.21.0 sdist: `patches check` (warm)
against the by-hand way: extract the sdist, `git init`, `git apply --check` each patch."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from common import Row, eb, run, scratch_workspace, timed

SPEC = """\
base: scratch
platform: linux/arm64
components:
  vllm:
    source:
      pypi: {version: 0.21.0}
    patches:
      - vllm/0001-dflash-target-layer-ids-off-by-one.patch
      - vllm/0002-qwen3-next-supports-eagle3.patch
    build: {script: build.sh}
    outputs: {wheels: /opt/out}
"""


def bench(home: Path) -> list:
    ws = scratch_workspace("patches")
    (ws / "images/bench-vllm").mkdir()
    (ws / "images/bench-vllm/image.yaml").write_text(SPEC)
    (ws / "images/bench-vllm/build.sh").write_text("#!/bin/sh\nexit 1\n")
    env = {"ENGINEBUILD_HOME": str(home)}
    run(eb(ws, "lock", "bench-vllm"), cwd=ws, env=env)
    run(eb(ws, "patches", "check", "bench-vllm"), cwd=ws, env=env)  # cold: download, index, extract touched files
    ours = timed(eb(ws, "patches", "check", "bench-vllm"), repeat=5, cwd=ws, env=env)

    import json
    pin = json.loads((ws / "lockfiles/bench-vllm.lock").read_text())["inputs"]["components.vllm.source"]["resolved"]
    archive = home / "cas" / "sha256" / pin["sha256"][:2] / pin["sha256"]
    patches = [str(ws / "patches/vllm" / p) for p in ("0001-dflash-target-layer-ids-off-by-one.patch",
                                                       "0002-qwen3-next-supports-eagle3.patch")]
    script = (f"set -e; d=$(mktemp -d); tar -xzf {archive} -C $d; cd $d/vllm-0.21.0; git init -q; "
              + "; ".join(f"git apply --check {p}" for p in patches) + "; rm -rf $d")
    baseline = timed(["bash", "-c", script], repeat=3)
    shutil.rmtree(ws, ignore_errors=True)
    return [Row("e. patch check, vllm 0.21.0 sdist (35 MB)", ours, baseline, "s",
                "python BUILD.py patches check bench-vllm   (warm store)",
                "tar -xzf vllm-0.21.0.tar.gz && git init && git apply --check <each patch>")]


if __name__ == "__main__":
    import sys

    from common import print_table
    home = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="eb-bench-home-"))
    print_table(bench(home))
