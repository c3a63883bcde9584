"""The mission's image built here (`qwen36-dflash-pypi`): vLLM 0.21.0 from its PyPI sdist with
the DFlash layer-id patch, packaged around the release wheel's compiled extensions (nothing
compiles), on its whole PyPI closure. Executed in the image, not grepped: the patch's own
checks (patches/vllm/0001-….checks.yaml) run in it as it is built: the patched method turns a
drafter's target layer ids into vLLM's aux taps; `patches check --behaviour` builds it without
the patch and says vLLM 0.21.0 still needs it. Built for linux/amd64 in a store of its own,
removed afterwards."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, TURBOQUANT_BUNDLE, TURBOQUANT_MIRROR, need, need_free_disk, run_cli
from enginebuild.io.store import Store
from helpers.docker import assert_pip_check_clean, docker, enginebuild_tags, remove_new_tags

pytestmark = [pytest.mark.network]
IMAGE = "qwen36-dflash-pypi"
PATCH = "patches/vllm/0001-dflash-target-layer-ids-off-by-one.patch"
# In one interpreter (vLLM imports once): the method the patch changes, called on a stand-in for
# the runner's speculative config (vLLM imports on a CPU machine when told the platform); the
# version as Python sees it; the sha256 of each compiled extension
PROBE = """
import hashlib, importlib.metadata as m, json, pathlib, vllm
from types import SimpleNamespace as NS
from vllm.v1.worker.gpu_model_runner import GPUModelRunner
drafter = NS(dflash_config={"target_layer_ids": [1, 16, 31, 46, 61]})
runner = NS(speculative_config=NS(draft_model_config=NS(hf_config=drafter)))
root = pathlib.Path(vllm.__file__).parent
print(json.dumps({"aux": str(GPUModelRunner._get_eagle3_aux_layers_from_config(runner)),
                  "versions": [vllm.__version__, m.version("vllm")],
                  "extensions": {str(p.relative_to(root.parent)): hashlib.sha256(p.read_bytes()).hexdigest()
                                 for p in sorted(root.rglob("*.so"))}}))
"""


def _module_text(tag: str, path: str) -> str:
    """A file of the image's vLLM package, found by the image's interpreter without importing vLLM."""
    code = ("import importlib.util, pathlib, sys; "
            "print(pathlib.Path(importlib.util.find_spec('vllm').origin).parent.joinpath(sys.argv[1]).read_text())")
    out = docker("run", "--rm", "--entrypoint", "python3", tag, "-c", code, path.removeprefix("vllm/"), check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


BYTECODE = """import importlib.util, pathlib, sys
source = pathlib.Path(importlib.util.find_spec('vllm').origin).parent.joinpath(sys.argv[1])
pyc = pathlib.Path(importlib.util.cache_from_source(str(source))).read_bytes()
print(int.from_bytes(pyc[4:8], 'little'), pyc[8:16] == importlib.util.source_hash(source.read_bytes()))
"""


def _bytecode_of(tag: str, path: str) -> list[str]:
    """(the flags of the .pyc the image holds for a module of its vLLM, whether it was compiled from
    the source the image holds), as the image's interpreter reads them."""
    out = docker("run", "--rm", "--entrypoint", "python3", tag, "-c", BYTECODE, path.removeprefix("vllm/"),
                 check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.split()


def _probe(tag: str) -> dict:
    out = docker("run", "--rm", "-e", "VLLM_TARGET_DEVICE=cpu", "--entrypoint", "python3", tag, "-c", PROBE,
                 check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


TURBOQUANT = "qwen35-dflash-turboquant-pypi"
BUNDLE = TURBOQUANT_BUNDLE
HOOKED = """
import turboquant.quantizer, vllm.v1.worker.gpu_model_runner as runner
print(getattr(runner.GPUModelRunner.load_model, "_turboquant", False))
"""


def turboquant_in_the_same_runtime(workspace: Path, env: dict, home: Path) -> None:
    """The mission's second stack: TurboQuant from its pinned commit, served by the mirror of
    ../shared/mirrors (GitHub is out of reach), with its patch, installed beside the same vLLM:
    it imports, its .pth bootstrap hooks vLLM's model runner when ENABLE_TURBOQUANT=1 and not
    otherwise (executed, on the CPU), its patch's GPU check is listed as not run here, and the
    wheel is the one an H100 ran (tests/corpus/turboquant-gpu-outcomes.json)."""
    need(BUNDLE.is_file(), f"the TurboQuant mirror is not at {BUNDLE}")
    env = {**env, **TURBOQUANT_MIRROR}
    proc = run_cli(["image", TURBOQUANT, "--platform", "linux/amd64"], workspace, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"https://github.com/0xSero/turboquant: fetched from the mirror {BUNDLE}" in proc.stderr
    # the plugin built, on the runtime's environment (with scipy for it, so vLLM's package is made on it again)
    assert re.search(r"built \d component\(s\) \([^)]*\bturboquant\b", proc.stdout), proc.stdout[-2000:]
    assert ("NOT RUN turboquant/0001-cache-qjl-powers-per-device.patch: cuda-graph-capture: needs a GPU: this engine "
            "has no NVIDIA runtime to give it one") in proc.stderr, proc.stderr[-3000:]
    assert f"patches: {TURBOQUANT} (linux/amd64): patch checks ok: 2 of 2 passed, 1 not run" in proc.stderr
    tag = f"enginebuild/{TURBOQUANT}:latest"
    for enabled, hooked in (("1", "True"), ("0", "False")):
        out = docker("run", "--rm", "-e", "VLLM_TARGET_DEVICE=cpu", "-e", "VLLM_LOGGING_LEVEL=ERROR", "-e",
                     f"ENABLE_TURBOQUANT={enabled}", "--entrypoint", "python3", tag, "-c", HOOKED, check=False)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.strip().splitlines()[-1] == hooked, (enabled, out.stdout[-2000:])
    # its patch is applied as files: the plugin's wheel is the one the GPU record ran without the
    # patch, and the patched module the image holds is the one of the wheel the record ran with it
    # (built with the patch inside, here): a rebuild that changes either makes the record stale
    record = json.loads((ROOT / "tests/corpus/turboquant-gpu-outcomes.json").read_text())
    runs = {r["variant"]: r["wheel_sha256"] for r in record["runs"]}
    stale = "the TurboQuant wheel changed: run scripts/gpu-truth/turboquant.py again"
    assert _turboquant_wheel(workspace, env, home)[0] == runs["unpatched"], stale
    held = docker("run", "--rm", "--entrypoint", "python3", tag, "-c", "import hashlib, turboquant.quantizer as q; "
                  "print(hashlib.sha256(open(q.__file__, 'rb').read()).hexdigest())").stdout.split()[-1]
    inside = ["--set", "components.turboquant.patches-as-files=false"]
    proc = run_cli(["image", TURBOQUANT, "--platform", "linux/amd64", "--no-load", *inside], workspace, env=env)
    assert proc.returncode == 0 and "built 1 component(s) (turboquant)" in proc.stdout, proc.stdout[-3000:]
    sha, path = _turboquant_wheel(workspace, env, home, *inside)
    assert sha == runs["patched"], stale
    with zipfile.ZipFile(path) as wheel:
        assert hashlib.sha256(wheel.read("turboquant/quantizer.py")).hexdigest() == held
    check = run_cli(["patches", "check", TURBOQUANT], workspace, env=env)
    assert check.returncode == 0 and "applies           turboquant/0001-cache-qjl-powers-per-device.patch" \
        in check.stdout, check.stdout + check.stderr


def _turboquant_wheel(workspace: Path, env: dict, home: Path, *extra: str) -> tuple[str, Path]:
    """The sha256 of the wheel the TurboQuant component built, and where the store keeps it."""
    doc = json.loads(run_cli(["plan", TURBOQUANT, "--platform", "linux/amd64", "--json", *extra], workspace,
                             env=env).stdout)["images"][0]
    key = next(c["key"] for c in doc["components"] if c["name"] == "turboquant")
    (wheel,) = Store(home).record("outputs", key)["wheels"]
    return wheel[1], Store(home).path(wheel[1])


def _layers(workspace: Path, env: dict, *extra: str) -> dict[str, str]:
    """Each layer of the image's plan, by name: the key its bytes are kept under."""
    proc = run_cli(["plan", IMAGE, "--platform", "linux/amd64", "--json", *extra], workspace, env=env)
    assert proc.returncode == 0, proc.stderr
    return {row["name"]: row["content_key"] for row in json.loads(proc.stdout)["images"][0]["layers"]}


def _merged(home: Path, keys: list[str]) -> dict[str, tuple]:
    """What the layers kept under `keys` leave, stacked in that order: path -> (type, mode, owner,
    sha256 of the bytes or the link's target)."""
    store, out = Store(home), {}
    for key in keys:
        for sha, _ in Store(home).record("layers", key)["layers"]:
            with tarfile.open(store.path(sha)) as tar:
                for member in tar:
                    handle = tar.extractfile(member) if member.isreg() else None
                    body = hashlib.sha256(handle.read()).hexdigest() if handle else member.linkname
                    out[member.name.rstrip("/")] = (member.type, oct(member.mode), member.uid, member.gid, body)
    return out


def test_the_mission_image_builds_and_its_vllm_behaves_as_patched(workspace, tmp_path, docker_engine,
                                                                 pypi_reachable, debian_reachable):
    home = tmp_path / "home"
    need_free_disk(tmp_path, 14, "the qwen36-dflash-pypi build's store")
    root = docker("info", "--format", "{{.DockerRootDir}}").stdout.strip()
    need_free_disk(Path(root), 30 if Path(root).stat().st_dev == tmp_path.stat().st_dev else 18,
                   "the qwen36-dflash-pypi build's store and engine")
    env = {"ENGINEBUILD_HOME": str(home)}
    tag, unpatched = f"enginebuild/{IMAGE}:latest", f"enginebuild/{IMAGE}:unpatched"
    chains = enginebuild_tags()
    try:
        proc = run_cli(["image", IMAGE, "--platform", "linux/amd64"], workspace, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "component vllm-kernels: the release's wheel vllm-0.21.0" in proc.stdout + proc.stderr
        # the patch's checks ran in the image: the patched method, on two drafters' configs
        assert f"patches: {IMAGE} (linux/amd64): patch checks ok: 2 of 2 passed" in proc.stderr, proc.stderr[-3000:]
        probe = _probe(tag)
        assert probe["aux"] == "(2, 17, 32, 47, 62)"
        # vLLM 0.21.0's CLI infers the device before it parses `--version` (no GPU here: it stops),
        # so the version is read as Python sees it: the precompiled route stamps the distribution
        assert probe["versions"] == ["0.21.0", "0.21.0+precompiled"]
        assert_pip_check_clean(tag, "--entrypoint", "python3")

        # the compiled extensions are the release wheel's bytes
        lock = json.loads((workspace / f"lockfiles/{IMAGE}.lock").read_text())["inputs"]
        release = lock["components.vllm-kernels.release@linux/amd64"]["resolved"]
        with zipfile.ZipFile(Store(home).path(release["sha256"])) as wheel:
            shipped = {n: hashlib.sha256(wheel.read(n)).hexdigest() for n in wheel.namelist() if n.endswith(".so")}
        ours = probe["extensions"]
        assert len(ours) >= 5 and "vllm/_C.abi3.so" in ours
        assert {n: shipped.get(n) for n in ours} == ours

        # the same image without the patch (the mission's qwen36-dflash, built through this image):
        # the patch is applied as files, so the package component is the one built already and only
        # layers are written; vLLM 0.21.0 reads the drafter's ids unchanged: it still needs the patch
        proc = run_cli(["patches", "check", "qwen36-dflash", "--behaviour"], workspace, env=env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        said = proc.stdout + proc.stderr
        assert "component(s)" not in said and "the release's wheel" not in said, said[-3000:]
        assert f"qwen36-dflash: at the lock's pin through {IMAGE} (linux/amd64), built without {PATCH[8:]}" in said
        for check in ("dflash-ids-only", "dflash-and-eagle-blocks"):
            assert f"{check:<28} still needed  printed '(1, 16, 31, 46, 61)'" in proc.stdout, proc.stdout

        turboquant_in_the_same_runtime(workspace, env, home)

        # a comment line added to the patch's Python hunk: no component is built, one layer of patched
        # files is written (and the manifest naming the patch)
        patch = workspace / PATCH
        text = patch.read_text()
        patch.write_text(text.replace("+                # DFlash drafters count",
                                      "+                # (a comment)\n+                # DFlash drafters count", 1)
                         .replace("@@ -5042,7 +5042,12 @@", "@@ -5042,7 +5042,13 @@"))
        plan = run_cli(["plan", IMAGE, "--platform", "linux/amd64"], workspace, env=env)
        assert plan.returncode == 0, plan.stderr
        lines = {line.split()[1]: line for line in plan.stdout.splitlines() if line.strip().startswith("component")}
        assert " exists " in lines["vllm-kernels"] and " exists " in lines["vllm"], plan.stdout
        assert f"vllm: {PATCH.rsplit('/', 1)[1]} applied as files (1 file, " in plan.stdout, plan.stdout
        # (and the bytecode of the layers: only the new layer of patched files is compiled)
        assert "0 component(s) and 0 command layer(s) to build, 3 layer(s) to write" in plan.stdout, plan.stdout
        proc = run_cli(["image", IMAGE, "--platform", "linux/amd64"], workspace, env=env)
        assert proc.returncode == 0 and "component(s)" not in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
        # the edited module is in the image, and the patch's checks ran its method there again
        assert f"patches: {IMAGE} (linux/amd64): patch checks ok: 2 of 2 passed in" in proc.stderr, proc.stderr[-3000:]
        assert _module_text(tag, "vllm/v1/worker/gpu_model_runner.py").count("# (a comment)") == 1
        # and its bytecode is the patched file's, hash-checked (flags 3): the release's is not what Python finds
        assert _bytecode_of(tag, "vllm/v1/worker/gpu_model_runner.py") == ["3", "True"]

        # the same stack in the package's build: the same files, path for path, bytes and modes (the
        # store's layers compared: not loaded into the engine, whose checks the image above ran)
        inside = ["--set", "components.vllm.patches-as-files=false"]
        proc = run_cli(["image", IMAGE, "--platform", "linux/amd64", "--no-load", *inside], workspace, env=env)
        assert proc.returncode == 0 and "built 1 component(s) (vllm)" in proc.stdout, \
            proc.stdout[-3000:] + proc.stderr[-3000:]
        as_files, in_build = _layers(workspace, env), _layers(workspace, env, *inside)
        vllm = "python vllm (built by component vllm)"
        patched = f"patches of vllm as files ({PATCH.rsplit('/', 1)[1]})"
        derived = {n for n in [*as_files, *in_build] if n.startswith("bytecode ")}  # of the layers above: they differ
        assert {n: k for n, k in as_files.items() if n not in (vllm, patched, *derived)} == \
            {n: k for n, k in in_build.items() if n not in (vllm, *derived)}  # every other layer is the same layer
        ours, theirs = _merged(home, [as_files[vllm], as_files[patched]]), _merged(home, [in_build[vllm]])
        assert len(ours) > 1000 and sorted(set(ours) ^ set(theirs)) == []
        assert {p: (ours[p], theirs[p]) for p in ours if ours[p] != theirs[p]} == {}
    finally:
        remove_new_tags(chains, home, tag, f"enginebuild/{IMAGE}:latest-amd64", unpatched, f"{unpatched}-amd64",
                        f"enginebuild/{TURBOQUANT}:latest", f"enginebuild/{TURBOQUANT}:latest-amd64")
        shutil.rmtree(home, ignore_errors=True)


def test_patches_check_of_the_split_mission_image_moves_both_stacks_to_the_release_asked(pypi_reachable):
    """The mission's CI triages a bump with `patches check qwen36-dflash --engine 0.22.0`: both
    stacks on vLLM's sdist (its compiled part and its package) are checked against 0.22.0, where
    the DFlash fix is upstream, without naming a component."""
    from conftest import ROOT

    proc = run_cli(["patches", "check", "qwen36-dflash", "--engine", "0.22.0", "--json"], ROOT)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert {d["component"]: (d["override"], [p["status"] for p in d["patches"]]) for d in doc} == {
        "vllm-kernels": (True, ["obsolete"]), "vllm": (True, ["obsolete"])}
