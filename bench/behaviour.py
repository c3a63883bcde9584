"""u. Does vLLM still need the DFlash patch, by what it does: `patches check qwen36-dflash
--behaviour` at the lock's pin (0.21.0), at 0.22.0 and at the newest release on the index, each
building qwen36-dflash-pypi without the patch at that version (vLLM's release wheel, its sdist,
that version's own requirements resolved for the one build) and running the patch's checks in
it. Prints the table README's "Patch stacks" shows, with each run's seconds, and writes it to
build/behaviour-table.json. About 40 GB of disk and 15 min on a warm store here.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from common import ROOT, eb, run

VERSIONS = (None, "0.22.0", "latest")


def bench_behaviour(ws: Path, env: dict) -> list[dict]:
    table = []
    for version in VERSIONS:
        args = ["patches", "check", "qwen36-dflash", "--behaviour", "--json"] + (["--engine", version] if version else [])
        start = time.perf_counter()
        proc = run(eb(ws, *args), cwd=ws, env=env, check=False)
        took = time.perf_counter() - start
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"patches check --behaviour {version}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
        doc = json.loads(proc.stdout)[0]
        row = {"engine": doc["engine"], "seconds": round(took, 1), "image_checks_failed": doc.get("image_checks_failed"),
               "checks": {c["check"]: {"behaviour": c["behaviour"], "text": c["text"], "output": c["output"].strip()}
                          for c in doc["checks"]}}
        table.append(row)
        print(f"  u. {row['engine']}: " + "; ".join(f"{name} {c['behaviour']} ({c['output']}), text {c['text']}"
                                                 for name, c in row["checks"].items()) + f" in {took:.0f}s",
              file=sys.stderr, flush=True)
    out = ROOT / "build" / "behaviour-table.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(table, indent=2) + "\n")
    return table
