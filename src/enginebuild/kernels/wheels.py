"""The lock-time lint: binary wheels an image installs, checked against its `cuda-archs` before
anything is built (a stock vLLM wheel in a Spark image is flagged when it is locked).

What a wheel carries is recorded in the store by the wheel's sha256, so each wheel is
downloaded and read once; the judgement is made again with the spec's current rules.
"""

from __future__ import annotations

from enginebuild.execution.fetch import Fetcher
from enginebuild.io.store import Store
from enginebuild.kernels.archs import parse_declared
from enginebuild.kernels.cuobjdump import Cuobjdump, DeviceCode
from enginebuild.kernels.image import tool_of
from enginebuild.kernels.scan import FileReport, Rules, Skip, code_from_json, code_to_json, judge, scan_wheel
from enginebuild.layerkinds.base import Download
from enginebuild.lock.lockfile import Lock
from enginebuild.recipe.model import ImageSpec
from enginebuild.wire import JsonDoc

RECORD = "wheel-device-code-v2"  # v2: family cubins and PTX ISA versions, read from the headers


def binary_wheels(lock: Lock) -> list[JsonDoc]:
    """The runtime's platform wheels (pure-Python ones carry no device code)."""
    out: dict[str, JsonDoc] = {}
    for name, entry in sorted(lock.entries.items()):
        if not name.startswith("runtime.python@") or not entry.resolved:
            continue
        for pkg in entry.resolved.get("packages") or ():
            filename = str(pkg.get("filename", ""))
            if filename.endswith(".whl") and not filename.endswith("-none-any.whl") and pkg.get("sha256"):
                out[str(pkg["sha256"])] = pkg
    return list(out.values())


def _device_code(store: Store, fetcher: Fetcher, pkg: JsonDoc, tool: Cuobjdump,
                 rules: Rules) -> list[tuple[str, DeviceCode]]:
    sha = str(pkg["sha256"])
    record = store.record(RECORD, sha)
    if record is None:
        path = fetcher.download(Download(sha, (str(pkg.get("url", "")),), str(pkg["filename"]), pkg.get("size"),
                                         str(pkg.get("index") or ""), str(pkg.get("name") or ""),
                                         str(pkg["filename"])))
        reports = scan_wheel(path, rules, tool)
        record = {"files": [{"path": r.path, **code_to_json(r.code)} for r in reports]}
        store.put_record(RECORD, sha, record)
    out = []
    for item in record.get("files") or ():
        out.append((str(item["path"]), code_from_json(item)))
    return out


def lint_wheels(spec: ImageSpec, lock: Lock, store: Store) -> list[FileReport]:
    """Every CUDA binary of the image's binary wheels that lacks a declared arch."""
    if not spec.cuda_archs:
        return []
    wheels = binary_wheels(lock)
    if not wheels:
        return []
    rules = Rules([parse_declared(a) for a in spec.cuda_archs], jit=spec.cuda_verify.jit,
                  skip=tuple(Skip(s.path, s.why) for s in spec.cuda_verify.skip), driver=spec.cuda_verify.driver)
    tool = tool_of(lock, store)
    fetcher = Fetcher(store)
    bad = []
    for pkg in wheels:
        for path, code in _device_code(store, fetcher, pkg, tool, rules):
            report = judge(path, str(pkg["filename"]), code, rules)
            if not report.ok:
                bad.append(report)
    return bad

