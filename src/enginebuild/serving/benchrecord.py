"""A deployment record: the speeds a locked deployment was measured at, beside its lock.

`serve bench --locked FILE` runs the image's own `bench.sh` (llama-benchy, pinned in the image) in
the head's container of the running cluster, reads the JSON it saved, and writes
`FILE.bench.json`: the lock's image digest, model (repository, revision, a digest of its files'
sums), settings and nodes, the benchmark's settings, and per run the prompt and response sizes, the
concurrency and the mean prompt-processing and generation throughputs (tokens/s). What the
container printed is read as another party's: sizes and numbers checked, nothing else taken.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from enginebuild.errors import EngineBuildError, shown_line
from enginebuild.io.files import write_atomic
from enginebuild.serving import driver
from enginebuild.serving.deployment import Deployment
from enginebuild.serving.driver import Reached, ServeFailed
from enginebuild.wire import JsonDoc, loads

BENCH = "/opt/enginebuild/bin/bench.sh"
RESULT = "/tmp/enginebuild-bench.json"
LIMIT_S = 6 * 3600
MAX_RUNS = 256


@dataclass(frozen=True)
class Run:
    prompt_size: int
    response_size: int
    concurrency: int
    pp_tokens_s: float
    tg_tokens_s: float


def measured(head: Reached, ident: str, settings: dict[str, str]) -> list[Run]:
    """bench.sh run in the head's container with the BENCH_* `settings`; its runs."""
    env = tuple(f"{k}={v}" for k, v in sorted(settings.items())) + (f"BENCH_RESULT={RESULT}",)
    try:
        status, said = driver.exec_in(head.engine, ident, [BENCH, "--skip-coherence"], LIMIT_S, env)
        if status != 0:
            raise ServeFailed([f"{head.node.name}: {BENCH} failed (exit {status}): "
                               f"{shown_line(said.strip()[-400:]) or 'no output'}"])
        status, text = driver.exec_in(head.engine, ident, ["cat", RESULT], 60)
    except EngineBuildError as exc:
        raise ServeFailed([f"{head.node.name}: running {BENCH}: {exc.message}"]) from None
    try:
        return runs_of(loads(text))
    except (ValueError, TypeError, KeyError) as exc:
        raise ServeFailed([f"{head.node.name}: {RESULT} is not llama-benchy's result: {shown_line(str(exc))}"]) \
            from None


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e12:
        raise ValueError(f"{what}: not a number")
    return float(value)


def runs_of(doc: object) -> list[Run]:
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ValueError("no benchmarks list")
    runs = []
    for item in doc["benchmarks"][:MAX_RUNS]:
        if not isinstance(item, dict):
            raise ValueError("a benchmark is not an object")
        sizes = [int(_number(item.get(k), k)) for k in ("prompt_size", "response_size", "concurrency")]
        rates = [_number((item.get(k) or {}).get("mean"), f"{k}.mean") for k in ("pp_throughput", "tg_throughput")]
        runs.append(Run(*sizes, *rates))
    if not runs:
        raise ValueError("no benchmark ran")
    return runs


def record(lock: Deployment, settings: dict[str, str], runs: list[Run]) -> JsonDoc:
    model: JsonDoc = {}
    if lock.model is not None:
        sums = "".join(f"{p}\0{s}\0{h}\n" for p, (s, h) in sorted(lock.model.files.items()))
        model = {"path": lock.model.path, "files_sha256": hashlib.sha256(sums.encode()).hexdigest(),
                 **({"repository": lock.model.repository, "revision": lock.model.revision}
                    if lock.model.repository else {})}
    return {"format": 1, "image": lock.image, "model": model, "env": dict(sorted(lock.env.items())),
            "nodes": [{"name": n, "address": a, "role": r} for n, a, r in lock.nodes],
            "bench": dict(sorted(settings.items())),
            "runs": [{"prompt_size": r.prompt_size, "response_size": r.response_size, "concurrency": r.concurrency,
                      "pp_tokens_s": round(r.pp_tokens_s, 3), "tg_tokens_s": round(r.tg_tokens_s, 3)} for r in runs],
            "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def write(lock_path: Path, doc: JsonDoc) -> Path:
    out = lock_path.with_name(lock_path.name.removesuffix(".json") + ".bench.json")
    write_atomic(out, (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode())
    return out
