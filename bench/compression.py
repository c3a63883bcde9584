"""s. gzip of a push's layers side by side (one thread per CPU, as oci/push.py does) vs one at a
time, on layers like an image's (part incompressible wheels, part text), with the same bytes
out: the row's note says whether the digests agree; then `--compression zstd` and
`--compression gzip-isal` vs gzip, side by side all, with the bytes each makes."""
from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import ROOT, Row

sys.path.insert(0, str(ROOT / "src"))

from enginebuild.io.store import Store, make_blob  # noqa: E402
from enginebuild.oci.image import Layer  # noqa: E402
from enginebuild.oci.push import COMPRESSIONS, compressed  # noqa: E402


def _layers(store: Store, count: int, mib: int) -> list[Layer]:
    out = []
    for seed in range(count):
        rng = random.Random(seed)

        def write(sink, rng=rng) -> None:
            for block in range(mib):
                sink.write(rng.randbytes(1 << 19) if block % 2 else (f"text {block} " * 80000)[: 1 << 20].encode())

        blob = make_blob(store, f"layer {seed}", write)
        out.append(Layer(f"sha256:{blob.sha256}", blob.size, f"layer {seed}", blob.sha256))
    return out


def bench_compression(count: int = 4, mib: int = 192) -> list[Row]:
    cpus = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="eb-bench-gzip-") as folder:
        times, digests, sizes = {}, {}, {}
        for how in ("one at a time", "side by side", "zstd side by side", "gzip-isal side by side"):
            store = Store(Path(folder) / how.replace(" ", "-"))
            layers = _layers(store, count, mib)
            kind = COMPRESSIONS[how.split()[0] if how.startswith(("zstd", "gzip-isal")) else "gzip"]
            start = time.perf_counter()
            if how == "one at a time":
                made = [compressed(store, layer, kind) for layer in layers]
            else:
                with ThreadPoolExecutor(max_workers=cpus) as pool:
                    made = list(pool.map(compressed, [store] * count, layers, [kind] * count))
            times[how] = time.perf_counter() - start
            digests[how], sizes[how] = [sha for sha, _ in made], sum(size for _, size in made)
    same = "the same digests" if digests["one at a time"] == digests["side by side"] else "DIFFERENT digests"
    return [Row(f"s1. gzip of {count} layers of {mib} MiB side by side ({cpus} CPUs) vs one at a time",
                times["side by side"], times["one at a time"], "s", "oci/push.py's compression, a thread per CPU",
                "the same, one layer after another", same),
            Row("s2. zstd (--compression zstd, level 3) of the same layers side by side vs gzip side by side",
                times["zstd side by side"], times["side by side"], "s", "zstd", "gzip",
                f"{sizes['zstd side by side'] / 2**20:.1f} MiB vs {sizes['side by side'] / 2**20:.1f} MiB out"),
            Row("s3. gzip made by ISA-L (--compression gzip-isal, level 2) of the same layers side by side vs "
                "zlib's gzip side by side", times["gzip-isal side by side"], times["side by side"], "s", "gzip-isal",
                "gzip", f"{sizes['gzip-isal side by side'] / 2**20:.1f} MiB vs {sizes['side by side'] / 2**20:.1f} "
                "MiB out")]
