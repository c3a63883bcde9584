"""verify's verdicts equal what a real GPU did. tests/corpus/gpu holds 27 one-kernel libraries
built by scripts/gpu-truth/build.py with pinned nvcc 13.0, 13.2 and 13.5 wheels; each was loaded
on an NVIDIA H100 (compute capability 9.0, driver 580 = CUDA 13.0) and its kernel launched by
scripts/gpu-truth/record.py, which wrote tests/corpus/gpu-outcomes.json. Here, with no GPU,
verify judges the same files for a 9.0 device on driver 580: served exactly when the GPU ran it."""
import hashlib
import json

import pytest

from conftest import ROOT
from enginebuild.core.cudacompat import driver_cuda, library_problem
from enginebuild.kernels.archs import parse_declared
from enginebuild.kernels.cuobjdump import Cuobjdump
from enginebuild.kernels.scan import Rules, judge
from helpers import report

FIXTURES = ROOT / "tests/corpus/gpu"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
TRUTH = json.loads((ROOT / "tests/corpus/gpu-outcomes.json").read_text())
MACHINE = TRUTH["machine"]
NO_KERNEL_IMAGE, UNSUPPORTED_PTX = 209, 222


def verdict(name: str):
    tool = Cuobjdump(ROOT / "no-cuobjdump-needed")  # the fat binary's headers are read first
    code = tool.device_code(FIXTURES / MANIFEST[name]["file"])
    rules = Rules([parse_declared(MACHINE["compute_capability"])], jit=True, driver=580)
    return judge(name, "fixture", code, rules)


def test_the_table_was_recorded_on_the_files_committed_here():
    assert len(TRUTH["outcomes"]) >= 20 and set(TRUTH["outcomes"]) == set(MANIFEST)
    assert driver_cuda(580) == tuple(int(p) for p in MACHINE["driver_cuda"].split("."))
    for name, entry in MANIFEST.items():
        assert hashlib.sha256((FIXTURES / entry["file"]).read_bytes()).hexdigest() == entry["sha256"]
        assert TRUTH["outcomes"][name]["sha256"] == entry["sha256"], f"{name} was rebuilt since it was recorded"
        assert TRUTH["outcomes"][name]["loaded"]
    errors = {row["error"] for row in TRUTH["outcomes"].values()}
    assert {0, NO_KERNEL_IMAGE, UNSUPPORTED_PTX} <= errors  # runs, no kernel image, PTX too new: all observed


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_verify_agrees_with_the_gpu(name):
    observed = TRUTH["outcomes"][name]["error"]
    found = verdict(name)
    report.count("kernel truth", "binaries judged against a GPU outcome")
    assert found.ok == (observed == 0), f"{name}: the GPU gave error {observed}; verify says {found.describe()}"
    if observed == UNSUPPORTED_PTX:
        assert found.too_new, "a PTX version the driver refused must be named as too new"


def test_family_and_arch_specific_cubins_are_told_apart_by_their_headers():
    assert [a.sass for a in verdict("t135-sm100f").code.sass] == ["sm_100f"]  # cuobjdump lists it as sm_100
    assert [a.sass for a in verdict("t135-sm100a").code.sass] == ["sm_100a"]
    assert [a.sass for a in verdict("t135-sm100").code.sass] == ["sm_100"]
    isa = {name: verdict(name).code.ptx_isa for name in ("t130-ptx80", "t132-ptx80", "t135-ptx80")}
    assert [v[0][1] for v in isa.values()] == [(9, 0), (9, 2), (9, 5)]


def test_runtimes_newer_than_the_driver_follow_minor_version_compatibility():
    ran = {TRUTH["outcomes"][n]["runtime"] for n, e in MANIFEST.items()
           if e["cudart"] == "shared" and TRUTH["outcomes"][n]["error"] == 0}
    assert {13020, 13050} <= ran  # CUDA 13.2 and 13.5 runtimes ran kernels on the CUDA 13.0 driver
    cuda = driver_cuda(580)
    for version in ran:
        assert library_problem(f"libcudart.so.{version // 1000}.{version % 1000 // 10}.0", cuda) is None
    # a runtime of a newer major version needs a newer driver; no such runtime exists to run here
    assert "needs a driver of CUDA 14.0" in library_problem("libcudart.so.14.0.1", cuda)
    # CUPTI numbers releases by year (Triton's wheel ships libcupti.so.2026.2.0): not a CUDA version
    assert library_problem("libcupti.so.2026.2.0", cuda) is None


@pytest.mark.network
def test_the_pinned_cuobjdump_lists_the_same_code_but_loses_the_family_bit(pypi_reachable, eb_home):
    from enginebuild.io.store import Store
    from enginebuild.kernels.image import tool_of
    from enginebuild.lock.lockfile import read_lock
    from enginebuild.recipe.catalog import Catalog

    spec = Catalog(ROOT).load("demo")
    tool = tool_of(read_lock(ROOT, spec), Store(eb_home))
    for name, entry in sorted(MANIFEST.items()):
        ours = tool.device_code(FIXTURES / entry["file"])
        listed = tool.listed(FIXTURES / entry["file"])
        plain = sorted({a.sass.rstrip("f") for a in ours.sass})
        assert plain == sorted({a.sass for a in listed.sass}), name
        assert [a.ptx for a in ours.ptx] == [a.ptx for a in listed.ptx], name


def test_a_binary_already_read_in_another_layer_is_known_by_its_bytes(tmp_path):
    """What a binary carries is kept by its content too: the same library in a new layer (a
    package rebuilt around a release's kernels) is answered from what was read before, and is
    then known under that layer's name as well."""
    import tarfile

    from enginebuild.io.store import Store
    from enginebuild.kernels.scan import scan_layers

    library = ROOT / "tests/corpus/gpu/t130-sm90.so"
    layers = []
    for name, where in (("a.tar", "opt/a/libk.so"), ("b.tar", "usr/lib/libother.so")):
        with tarfile.open(tmp_path / name, "w") as tar:
            tar.add(library, arcname=where)
        layers.append(tmp_path / name)
    store = Store(tmp_path / "home")
    rules = Rules([parse_declared("9.0")])
    tool = Cuobjdump(tmp_path / "no-tool" / "cuobjdump")  # the headers answer: the tool is never run

    def kept() -> set[str]:
        return {p.name for p in (tmp_path / "home").rglob("*") if p.is_file()}

    first = scan_layers([("a", layers[0], rules)], tool, store)
    records = kept()
    assert len(records) == 2  # what the bytes carry, under their content and under the layer's name
    second = scan_layers([("b", layers[1], rules)], tool, store)
    assert [(r.path, r.ok) for r in first] == [("/opt/a/libk.so", True)]
    assert [(r.path, r.ok) for r in second] == [("/usr/lib/libother.so", True)]
    assert [r.describe().split(":", 1)[1] for r in first] == [r.describe().split(":", 1)[1] for r in second]
    assert len(kept() - records) == 1  # the second layer's name for the same bytes
