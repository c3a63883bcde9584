"""Kernel architectures, verified on the host: the demo's CUDA library compiled by the pinned
nvcc carries sm_121a on both platforms; a stock vLLM wheel (PyPI, aarch64) in an image that
declares 12.1a is flagged at lock time and fails the build's kernel check, naming each
binary and the architectures it has."""
import io
import json

import pytest

from conftest import ROOT
from enginebuild.kernels.archs import Arch, missing, parse_code, parse_declared
from enginebuild.kernels.elf import has_device_code, section_names
from helpers import report
from helpers.inprocess import run_in_process
from helpers.specs import write_image

VLLM = """
description: a stock vLLM wheel in a Spark image
platform: linux/arm64
base: scratch
cuda-archs: [{archs}]
python:
  version: "3.12"
  requirements:
    - {{requirement: "vllm==0.21.0", deps: false}}
runtime-check:
  skip: [{{path: "*/vllm/*", why: "the wheel alone, without torch: a subject of the kernel check only"}}]
{extra}
"""
VLLM_C = "vllm/_C.abi3.so"
# family cubins (sm_100f, ...) as the fat binary's headers mark them: cuobjdump lists them as sm_100
STOCK_SASS = ["sm_75", "sm_80", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100f", "sm_110", "sm_110f",
              "sm_120", "sm_120f"]
STOCK_PTX = "PTX compute_75 (ISA 9.0) compute_80 (ISA 9.0) compute_90 (ISA 9.0)"


def codes(*names):
    return [parse_code(n) for n in names]


@pytest.mark.parametrize("declared,sass,ptx,jit,ok", [
    ("12.1a", ["sm_121a"], [], False, True),
    ("12.1a", ["sm_120", "sm_120a"], [], False, False),  # runs, but without 12.1a's own kernels
    ("12.1a", [], ["compute_120"], True, False),  # generic PTX has no arch-specific features
    ("12.1a", [], ["compute_121a"], True, True),
    ("12.1a", [], ["compute_121a"], False, False),  # PTX only counts when JIT is allowed
    ("12.1a+PTX", ["sm_121a"], [], False, False),  # the declared PTX is missing
    ("12.1a+PTX", ["sm_121a"], ["compute_121a"], False, True),
    ("12.1", ["sm_120"], [], False, True),  # same major, lower minor: binary compatible
    ("12.0", ["sm_121"], [], False, False),
    ("12.1", ["sm_120a"], [], False, False),  # arch-specific code runs only on its arch
    ("12.0", [], ["compute_90"], True, True),
    ("12.1f", ["sm_120f"], [], False, True),
    ("9.0a", ["sm_90"], [], False, False),
])
def test_declared_archs_are_served_as_nvidias_compatibility_rules_say(declared, sass, ptx, jit, ok):
    assert (missing([parse_declared(declared)], codes(*sass), codes(*ptx), jit=jit) == []) is ok


def test_arch_names_parse_and_print_both_ways():
    assert parse_code("sm_121a") == Arch(12, 1, "a") and parse_code("compute_90") == Arch(9, 0)
    assert Arch(12, 1, "a").sass == "sm_121a" and str(parse_declared("12.1a+PTX")) == "12.1a+PTX"
    with pytest.raises(ValueError):
        parse_declared("sm_121a")


@pytest.mark.parametrize("data", [b"", b"\x7fELF", b"\x7fELF" + b"\x02\x01\x01" + b"\xff" * 200,
                                  b"\x7fELF\x02\x01\x01" + b"\x00" * 57, bytes(range(256)) * 4])
def test_a_malformed_or_foreign_file_is_no_cuda_binary_and_no_crash(data):
    handle = io.BytesIO(data)
    assert section_names(handle) == [] or not has_device_code(handle)
    assert has_device_code(io.BytesIO(data)) is False


@pytest.fixture(scope="module")
def built_demo(docker_engine, debian_reachable, pypi_reachable):
    proc = run_in_process(["image", "demo"], ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.docker
@pytest.mark.network
def test_the_demo_is_verified_when_built_and_carries_sm_121a_on_both_platforms(built_demo):
    proc = run_in_process(["verify", "demo", "--json"], ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] and [v["platform"] for v in doc["images"]] == ["linux/amd64", "linux/arm64"]
    for verdict in doc["images"]:
        files = {f["path"]: f for f in verdict["files"]}
        assert files["/opt/enginebuild/lib/libdemo_cuda.so"]["sass"] == ["sm_121a"]
        assert verdict["declared"] == ["12.1a"]
        report.peak("kernels", "verify seconds (demo, per platform)", verdict["seconds"])
    text = run_in_process(["verify", "demo"], ROOT)
    assert "ok      /opt/enginebuild/lib/libdemo_cuda.so: sm_121a; no PTX" in text.stdout
    # the same image held to another GPU's architecture: nothing rebuilt, the verdict for that GPU
    other = run_in_process(["verify", "demo", "--platform", "linux/amd64", "--archs", "9.0", "--json"], ROOT)
    assert other.returncode == 1, other.stderr
    verdict = json.loads(other.stdout)["images"][0]
    assert verdict["declared"] == ["9.0"]
    assert [f["ok"] for f in verdict["files"] if f["path"] == "/opt/enginebuild/lib/libdemo_cuda.so"] == [False]
    bad = run_in_process(["verify", "demo", "--archs", "sm121"], ROOT)
    assert bad.returncode == 2 and "not a CUDA arch" in bad.stderr


@pytest.mark.docker
@pytest.mark.network
def test_verify_reads_the_library_built_for_each_platform(built_demo, tmp_path):
    """The arm64 library is an aarch64 ELF (read on this host), the amd64 one an x86-64 ELF."""
    from enginebuild.io.store import Store
    from enginebuild.lock.lockfile import read_lock
    from enginebuild.plan.image import Options, plan_image
    from enginebuild.plan.stored import layer_blobs
    from enginebuild.recipe.catalog import Catalog
    from enginebuild.settings import settings

    spec = Catalog(ROOT).load("demo")
    machines = {}
    for platform in ("linux/amd64", "linux/arm64"):
        plan = plan_image(spec, read_lock(ROOT, spec), platform, Options())
        node = next(n for n in plan.runtime.layers if n.name == "outputs of cuda-kernels (paths)")
        import tarfile

        store = Store(settings().home)
        with tarfile.open(store.path(layer_blobs(store, node)[0][0])) as tar:
            member = next(m for m in tar if m.name.endswith("libdemo_cuda.so"))
            head = tar.extractfile(member).read(20)
        machines[platform] = int.from_bytes(head[18:20], "little")
    assert machines == {"linux/amd64": 62, "linux/arm64": 183}  # EM_X86_64, EM_AARCH64


@pytest.fixture(scope="module")
def vllm_workspace(tmp_path_factory, pypi_reachable):
    root = tmp_path_factory.mktemp("vllm-wheel")
    (root / "lockfiles").mkdir()
    write_image(root, "stock", VLLM.format(archs='"12.1a"', extra=""))
    return root


@pytest.mark.network
def test_a_stock_vllm_wheel_is_flagged_when_it_is_locked(vllm_workspace):
    proc = run_in_process(["lock", "stock"], vllm_workspace)
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stderr.splitlines() if f": {VLLM_C}:" in line)
    assert line.startswith("images/stock/image.yaml:7: warning: vllm-0.21.0")
    assert f"{VLLM_C}: {' '.join(STOCK_SASS)}; {STOCK_PTX} -- MISSING 12.1a" in line
    report.count("kernels", "stock vLLM wheels flagged at lock time")


@pytest.mark.docker
@pytest.mark.network
def test_an_image_with_the_stock_vllm_wheel_fails_its_kernel_check_naming_each_binary(vllm_workspace,
                                                                                      docker_engine):
    assert run_in_process(["lock", "stock"], vllm_workspace).returncode == 0
    proc = run_in_process(["image", "stock"], vllm_workspace)
    assert proc.returncode == 1, proc.stderr
    assert "the kernel architecture check failed" in proc.stderr
    assert (f"MISSING /usr/local/lib/python3.12/dist-packages/{VLLM_C}: {' '.join(STOCK_SASS)}; "
            f"{STOCK_PTX} -- MISSING 12.1a") in proc.stderr
    verify = run_in_process(["verify", "stock", "--json"], vllm_workspace)
    assert verify.returncode == 1
    doc = json.loads(verify.stdout)["images"][0]
    files = {f["path"].split("dist-packages/")[1]: f for f in doc["files"]}
    assert files[VLLM_C]["sass"] == STOCK_SASS and files[VLLM_C]["missing"] == ["12.1a"]
    assert files["vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"]["sass"] == ["sm_90a"]
    assert not doc["ok"] and len(files) >= 5
    report.peak("kernels", "verify seconds (240 MB vLLM wheel image)", doc["seconds"])


@pytest.mark.docker
@pytest.mark.network
def test_jit_and_skip_rules_are_what_the_spec_says_and_nothing_more(vllm_workspace, docker_engine):
    """Declared 12.0 with JIT: sm_120 SASS or PTX <= 12.0 serve; FlashAttention 3 (sm_90a only)
    does not, until the spec skips it with a reason."""
    write_image(vllm_workspace, "jit", VLLM.format(archs='"12.0"', extra="cuda-verify: {jit: true}"))
    assert run_in_process(["lock", "jit"], vllm_workspace).returncode == 0
    proc = run_in_process(["image", "jit"], vllm_workspace)
    assert proc.returncode == 1
    failing = [line for line in proc.stderr.splitlines() if line.strip().startswith("MISSING")]
    assert len(failing) == 3 and all("_flashmla" in line or "_vllm_fa3_C" in line for line in failing), failing
    skip = ("cuda-verify:\n  jit: true\n  skip:\n"
            "    - {path: '*/vllm/_flashmla*', why: 'MLA kernels: Hopper and Blackwell datacenter only'}\n"
            "    - {path: '*/_vllm_fa3_C.abi3.so', why: 'FlashAttention 3 is Hopper only'}")
    write_image(vllm_workspace, "jit", VLLM.format(archs='"12.0"', extra=skip))
    proc = run_in_process(["verify", "jit"], vllm_workspace)
    assert proc.returncode == 0, proc.stdout
    assert "(not checked: FlashAttention 3 is Hopper only)" in proc.stdout


def test_verify_of_an_image_that_declares_no_archs_says_so_and_checks_its_runtime_closure(workspace):
    write_image(workspace, "plain", "base: scratch\nplatform: linux/amd64\n")
    assert run_in_process(["lock", "plain"], workspace).returncode == 0
    proc = run_in_process(["verify", "plain"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert "plain: declares no cuda-archs: kernels not checked" in proc.stdout
    assert "plain (linux/amd64): 0 executable(s)" in proc.stdout  # an empty image: nothing to load
    doc = json.loads(run_in_process(["verify", "plain", "--json"], workspace).stdout)
    assert doc["ok"] and doc["images"] == [] and doc["not_declared"] == ["plain"]
    assert [(r["platform"], r["checked"], r["ok"]) for r in doc["runtime"]] == [("linux/amd64", 0, True)]
    write_image(workspace, "plain", "base: scratch\nplatform: linux/amd64\nfiles:\n  /a: a\n")
    (workspace / "images/plain/a").write_text("a\n")
    assert run_in_process(["lock", "plain"], workspace).returncode == 0
    unbuilt = run_in_process(["verify", "plain"], workspace)
    assert unbuilt.returncode == 1 and "plain (linux/amd64) is not built at its current inputs" in unbuilt.stderr
