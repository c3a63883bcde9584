"""The Spark catalogue as committed: listed, locked, linted, patch stacks applying."""
import json

import pytest

from conftest import ROOT, TURBOQUANT_BUNDLE, TURBOQUANT_MIRROR, need
from enginebuild.lock.lockfile import read_lock, stale_inputs
from enginebuild.recipe.catalog import Catalog
from helpers.inprocess import run_in_process

RECIPES = ["llamacpp-minimax-ngram", "qwen3-coder-next-dflash", "qwen35-dflash", "qwen35-dflash-turboquant",
           "qwen36-dflash", "vllm-prefill"]


def load(name):
    return Catalog(ROOT).load(name)


def test_list_shows_the_six_recipes_and_the_five_images_buildable_here():
    rows = json.loads(run_in_process(["list", "--json"], ROOT).stdout)
    buildable = sorted(r["image"] for r in rows if r["lock"] != "abstract")
    assert buildable == sorted(RECIPES + ["demo", "llamacpp-cpu", "vllm-pypi", "qwen36-dflash-pypi",
                                           "qwen35-dflash-turboquant-pypi"])
    # TurboQuant built from its pinned commit, on the mission image's package
    assert tuple(load("qwen35-dflash-turboquant-pypi").chain[:2]) == ("qwen35-dflash-turboquant-pypi", "qwen36-dflash-pypi")
    # the mission's recipe with one key changed: its kernels from the release, the rest its own
    assert tuple(load("qwen36-dflash-pypi").chain[:2]) == ("qwen36-dflash-pypi", "qwen36-dflash")
    assert load("qwen36-dflash-pypi").component("vllm-kernels").release is not None
    assert "spark-vllm" in load("vllm-pypi").chain
    assert "spark-llamacpp" in load("llamacpp-cpu").chain  # the same launcher and scripts as the Spark images


def test_list_counts_patches_on_every_stack():
    rows = {r["image"]: r for r in json.loads(run_in_process(["list", "--json"], ROOT).stdout)}
    assert rows["qwen35-dflash-turboquant"]["patches"] == 1  # its patch sits on the TurboQuant component
    assert rows["qwen36-dflash"]["components"] == ["flashinfer", "vllm-kernels", "vllm"]


def test_editing_the_dflash_patch_rebuilds_no_vllm_component(workspace):
    """vLLM is split in a compiled part (declared inputs: C++/CUDA, CMake) and a package built
    around its wheel: the off-by-one patch edits a Python file, outside the compiled part's key,
    and applied as files to what the package installs: editing it moves no component's key, only
    the layer of patched files (a small layer instead of every CUDA file, or the package)."""
    def keys() -> dict:
        proc = run_in_process(["plan", "qwen36-dflash", "--json"], workspace)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)["images"][0]
        found = {c["name"]: c for c in doc["components"]}
        found.update({row["name"]: row for row in doc["layers"] if row["kind"] == "patched"})
        return found

    before = keys()
    assert [r["route"] for r in before["vllm"]["patch_routes"]] == ["files"]
    assert before["vllm-kernels"]["outside_declared_inputs"] == ["patches/vllm/0001-dflash-target-layer-ids-off-by-one.patch"]
    patch = workspace / "patches/vllm/0001-dflash-target-layer-ids-off-by-one.patch"
    patch.write_text(patch.read_text().replace("aux_hidden_state_layers=(2, 17, 32, 47, 62).",
                                               "aux_hidden_state_layers=(2, 17, 32, 47, 62) (edited)."))
    after = keys()
    assert {n: after[n]["key"] for n in ("vllm-kernels", "vllm", "flashinfer")} == \
        {n: before[n]["key"] for n in ("vllm-kernels", "vllm", "flashinfer")}
    layer = "patches of vllm as files (0001-dflash-target-layer-ids-off-by-one.patch)"
    assert after[layer]["key"] != before[layer]["key"]
    text = run_in_process(["plan", "qwen36-dflash"], workspace).stdout
    assert "touches none of its declared inputs" in text
    assert "vllm: 0001-dflash-target-layer-ids-off-by-one.patch applied as files (1 file, " in text, text


def test_recipes_share_one_vllm_base_and_one_llamacpp_base():
    for name in RECIPES:
        chain = load(name).chain
        family = "spark-llamacpp" if name.startswith("llamacpp") else "spark-vllm"
        assert family in chain and chain[-1] == "spark-base", chain


def test_every_committed_lock_is_fresh():
    proc = run_in_process(["lock", "--check"], ROOT)
    assert proc.returncode == 0, proc.stdout


def test_pins_that_this_machine_cannot_reach_are_recorded_as_unresolved_never_invented():
    for name in RECIPES:
        spec = load(name)
        lock = read_lock(ROOT, spec)
        assert stale_inputs(spec, lock) == []
        for entry in lock.entries.values():
            resolved = entry.resolved
            if resolved is None:
                assert entry.unresolved
            elif "commit" in resolved:
                assert len(resolved["commit"]) == 40
            elif "digest" in resolved and resolved["digest"]:
                assert resolved["ref"].endswith(resolved["digest"])


def test_published_digests_pin_the_nightly_base_without_network():
    lock = read_lock(ROOT, load("qwen35-dflash"))
    assert lock.raw("runtime.base@linux/arm64")["digest"] == \
        "sha256:a8f5362e73406dd35d1f513db0f2cba050e9075bf5a1e108a9e4337df6e080d8"


def test_the_benchmark_clients_whole_python_closure_is_locked():
    lock = read_lock(ROOT, load("qwen36-dflash"))
    python = lock.raw("runtime.python@linux/arm64")
    names = {p["name"] for p in python["packages"]}
    # llama-benchy's own requirements, and theirs, not only the three the spec names
    assert {"llama-benchy", "aiohttp", "openai", "pydantic", "tokenizers", "transformers", "numpy"} <= names
    assert all(p.get("sha256") and p.get("url") for p in python["packages"] if p["origin"] == "index")
    assert "could not be read here" in python["note"]  # the NVIDIA base is not reachable from here: said


def test_an_image_with_an_unresolved_pin_refuses_to_build():
    proc = run_in_process(["image", "qwen36-dflash"], ROOT, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 2
    assert "qwen36-dflash is not buildable here: input" in proc.stderr
    assert "is not pinned completely in lockfiles/qwen36-dflash.lock" in proc.stderr


@pytest.mark.parametrize("name", RECIPES)
def test_render_puts_the_files_last_and_ships_only_component_outputs(name):
    proc = run_in_process(["render", name, "--unpinned"], ROOT)
    assert proc.returncode == 0, proc.stderr
    runtime = proc.stdout.split("### runtime image")[1]
    lines = [line for line in runtime.splitlines() if line.startswith(("COPY", "ADD", "RUN", "#"))]
    copies = [i for i, line in enumerate(lines) if line.startswith("COPY files/")]
    assert copies and copies[-1] == max(i for i, line in enumerate(lines) if not line.startswith("# "))
    assert "ADD source" not in runtime and "/opt/enginebuild/src" not in runtime


def test_source_builds_compile_vllm_and_flashinfer_for_12_1a():
    for name in ("qwen36-dflash", "qwen3-coder-next-dflash"):
        spec = load(name)
        assert dict(spec.component("vllm").build.args)["TORCH_CUDA_ARCH_LIST"] == "12.1a"
        assert dict(spec.component("flashinfer").build.args)["FLASHINFER_CUDA_ARCH_LIST"] == "12.1a"
        assert spec.install == ("flashinfer", "vllm") and spec.cuda_archs == ("12.1a",)
    llama = load("llamacpp-minimax-ngram")
    assert dict(llama.component("llama.cpp").build.args)["CMAKE_CUDA_ARCHITECTURES"] == "121"
    assert llama.builder.base.endswith("devel-ubuntu24.04") and llama.runtime.base.endswith("runtime-ubuntu24.04")


@pytest.mark.network
def test_patches_check_passes_on_the_committed_catalogue(pypi_reachable):
    need(TURBOQUANT_BUNDLE.is_file(), f"the TurboQuant mirror is not at {TURBOQUANT_BUNDLE}")
    proc = run_in_process(["patches", "check", "--all", "--json"], ROOT, TURBOQUANT_MIRROR)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stacks = {(s["image"], s["component"]): [p["status"] for p in s["patches"]] for s in json.loads(proc.stdout)}
    assert stacks[("qwen36-dflash", "vllm")] == ["applies"]
    assert stacks[("qwen3-coder-next-dflash", "vllm")] == ["applies"]
    # TurboQuant's pinned commit, fetched from its mirror (github.com is out of reach here)
    assert stacks[("qwen35-dflash-turboquant", "turboquant")] == ["applies"]
    assert stacks[("qwen35-dflash-turboquant-pypi", "turboquant")] == ["applies"]
    assert stacks[("qwen35-dflash-turboquant-pypi", "vllm")] == ["applies"]


def test_one_broken_spec_is_one_row_and_the_rest_of_the_catalogue_goes_on(workspace):
    (workspace / "images/broken").mkdir()
    (workspace / "images/broken/image.yaml").write_text("base: scratch\nbogus: 1\n")
    (workspace / "images/badlabel").mkdir()
    (workspace / "images/badlabel/image.yaml").write_text('base: scratch\nlabels:\n  "a\\nb": x\n')
    listed = run_in_process(["list"], workspace)
    assert listed.returncode == 2
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert "images/broken/image.yaml:2: bogus: unknown key" in rows["broken"]
    assert "labels.a\\nb: invalid key" in rows["badlabel"]  # the line break escaped, never printed raw
    assert "locked" in rows["demo"]
    check = run_in_process(["lock", "--check"], workspace)
    assert check.returncode == 1
    assert "demo: ok" in check.stdout and "broken: skipped, its spec does not load" in check.stderr
    doctor = run_in_process(["doctor", "--json"], workspace)
    names = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert names["spec broken"]["status"] == "warn" and "unknown key" in names["spec broken"]["detail"]


@pytest.mark.registry
def test_an_image_not_buildable_here_is_called_so_by_every_command(workspace, registry):
    """vllm-prefill's base (ghcr.io) cannot be read from here, so its Python closure is resolved
    only in part: every command says the same thing about it."""
    rows = {r["image"]: r for r in json.loads(run_in_process(["list", "--json"], workspace).stdout)}
    assert rows["vllm-prefill"]["lock"] == "not-here" and rows["demo"]["lock"] == "locked"
    assert "runtime.python@linux/arm64" in rows["vllm-prefill"]["not_buildable_here"]
    check = run_in_process(["lock", "--check"], workspace)
    assert check.returncode == 0 and "vllm-prefill is NOT buildable here" in check.stdout
    gate = run_in_process(["lock", "--check", "--buildable"], workspace)
    assert gate.returncode == 1 and "not buildable here (--buildable)" in gate.stderr
    assert run_in_process(["lock", "--check", "--buildable", "demo"], workspace).returncode == 0
    plan = run_in_process(["plan", "vllm-prefill", "--json"], workspace)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)["images"][0]
    assert doc["buildable"] is False and "runtime.python@linux/arm64" in doc["unresolved"]
    assert run_in_process(["plan", "--all"], workspace).returncode == 0
    image = run_in_process(["image", "vllm-prefill"], workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert image.returncode == 2 and "vllm-prefill is not buildable here" in image.stderr
    old = run_in_process(["changed", "--to", f"{registry.host}/enginebuild-test"], workspace)
    assert old.returncode == 2 and f"hint: changed --prefix {registry.host}/enginebuild-test" in old.stderr, old.stderr
    changed = run_in_process(["changed", "--prefix", f"{registry.host}/enginebuild-test", "--json"], workspace)
    assert changed.returncode == 0, changed.stderr
    assert "vllm-prefill: skipped, not buildable here" in changed.stderr
    assert [r["image"] for r in json.loads(changed.stdout)["images"]] == ["demo", "llamacpp-cpu", "qwen35-dflash-turboquant-pypi",
                                                                        "qwen36-dflash-pypi", "vllm-pypi"]


def test_lock_without_update_moves_no_pin_when_nothing_was_asked(workspace):
    before = {p.name: p.read_bytes() for p in (workspace / "lockfiles").glob("*.lock")}
    proc = run_in_process(["lock", "vllm-prefill"], workspace)
    assert "lockfiles/vllm-prefill.lock is up to date" in proc.stdout, proc.stdout + proc.stderr
    after = {p.name: p.read_bytes() for p in (workspace / "lockfiles").glob("*.lock")}
    assert after == before
