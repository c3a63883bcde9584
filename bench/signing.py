"""v. What signing costs a push (docs/signing.md).

v1. The demo, both platforms, pushed signed (`push --sign --key`) vs the same push unsigned, each
    to a fresh repository of the same registry (layers mounted, not sent: what differs is the
    signing, the signed envelopes and the signatures); median of three each, seconds and bytes.
v2. vllm-pypi's documents: the SBOM and the provenance as they are pushed unsigned (a signed push
    sends them too), and the signed bundles a signed push adds (an in-toto statement in a DSSE
    envelope, base64 inside JSON: the provenance, and the small statement naming the full SBOM by
    its sha256, format 2): the bytes signing adds to its push, on a first push and after an edit
    alike, are v1's added bytes less the demo's bundles plus vllm-pypi's.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from pathlib import Path

from common import ROOT, Row, eb, run


def _push(ws: Path, env: dict, repository: str, extra: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    run(eb(ws, "push", "demo", "--to", repository, "--tag", "v1", *extra), cwd=ws, env=env)
    seconds = time.perf_counter() - start
    records = json.loads((ws / "lockfiles/demo.pushes.json").read_text())["pushes"]
    record = next(r for r in records if r["repository"] == repository)
    return seconds, int(record["bytes_pushed"])


def _document_growth(ws: Path, env: dict, image: str, key: Path) -> tuple[int, int]:
    """(plain bytes, signed bytes) of an image's SBOM and provenance, made from its lock here."""
    code = f"""
import json, sys
from pathlib import Path
from enginebuild.io.store import Store
from enginebuild.publish import signformat
from enginebuild.publish.provenance import make_provenance
from enginebuild.publish.sbom import make_sbom
from enginebuild.trust.signkeys import load_signer
from enginebuild.settings import settings
from enginebuild.workspace import Workspace
ws = Workspace(Path({str(ws)!r}))
spec = ws.spec({image!r}); lock = ws.lock(spec)
digest = "sha256:" + "0" * 64
platforms = {{p: "sha256:" + str(n) * 64 for n, p in enumerate(spec.platforms, 1)}}
sbom = make_sbom(spec, lock, "ghcr.io/o/i", {{}}, Store(settings().home))
provenance = make_provenance(ws.root, spec, lock, "ghcr.io/o/i", digest, platforms, {{}})
signer = load_signer({str(key)!r})
statement = signformat.statement(signformat.subjects("ghcr.io/o/i", digest, platforms), signformat.SBOM_PREDICATE,
                                 signformat.sbom_reference(sbom, "ghcr.io/o/i", digest))
signed = len(signformat.bundle(signer, statement)) + len(signformat.bundle(signer, provenance))
print(json.dumps([len(sbom) + len(provenance), signed]))
"""
    out = run([sys.executable, "-c", code], cwd=ws, env={**env, "PYTHONPATH": str(ROOT / "src")}).stdout
    plain, signed = json.loads(out)
    return plain, signed


def bench_signing(ws: Path, env: dict, rows: list, registry: str) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ws / "cosign.key"
    key.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    run(eb(ws, "image", "demo"), cwd=ws, env=env)
    salt = uuid.uuid4().hex[:8]
    _push(ws, env, f"{registry}/enginebuild-bench/sign-{salt}-first", [])  # the layers, once
    plain, signed = [], []
    for n in range(3):
        plain.append(_push(ws, env, f"{registry}/enginebuild-bench/sign-{salt}-plain{n}", []))
        signed.append(_push(ws, env, f"{registry}/enginebuild-bench/sign-{salt}-signed{n}",
                            ["--sign", "--key", str(key)]))
    t_plain, t_signed = (statistics.median(t for t, _ in runs) for runs in (plain, signed))
    b_plain, b_signed = (statistics.median(b for _, b in runs) for runs in (plain, signed))
    rows.append(Row("v1. signed push, demo (2 platforms) vs unsigned", t_signed, t_plain, "s",
                    f"python BUILD.py push demo --to R --sign --key K (+{t_signed - t_plain:.2f} s, "
                    f"+{b_signed - b_plain:.0f} bytes pushed: {b_signed:.0f} vs {b_plain:.0f})",
                    "python BUILD.py push demo --to R (the layers mounted, the SBOM and provenance unsigned)"))
    _, demo_signed = _document_growth(ws, env, "demo", key)
    vllm_plain, vllm_signed = _document_growth(ws, env, "vllm-pypi", key)
    estimate = (b_signed - b_plain) - demo_signed + vllm_signed
    rows.append(Row("v2. vllm-pypi: bytes signing adds to a push, first or after an edit (estimate)", estimate,
                    30_000, "bytes",
                    f"v1's added bytes - the demo's bundles ({demo_signed}) + vllm-pypi's ({vllm_signed} bytes of "
                    f"signed statements; its SBOM and provenance, {vllm_plain} bytes, go in either push)",
                    "the floor: 30 KB"))
