"""Building the demo for real: components on BuildKit, the runtime assembled by enginebuild,
the image run in the real engine; what each kind of edit rebuilds, read from plan and build."""
import io
import json
import re
import shutil
import subprocess
import tarfile
import time
import uuid

import pytest

from conftest import ROOT, need
from helpers.docker import docker, inspect, layers
from helpers.inprocess import run_in_process
from helpers.specs import PY_PATCH

pytestmark = [pytest.mark.docker, pytest.mark.network]


@pytest.fixture(scope="module")
def built_demo(docker_engine, debian_reachable, pypi_reachable):
    """The demo as committed, built once for this module (later builds find what it made). Through
    the full path (a global option is not the no-op fast path's): whichever test built the demo
    first in this worker, the run reports each platform, its checks and its components' outputs."""
    proc = run_in_process(["--progress", "plain", "image", "demo"], ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc


def edit(path, text=None) -> str:
    marker = uuid.uuid4().hex
    with open(path, "a") as handle:
        handle.write(text or f"# tuning note {marker}\n")
    return marker


PLATFORMS = ["linux/amd64", "linux/arm64"]


def plan_json(workspace) -> dict:
    """The plan of each platform of the demo, by platform."""
    proc = run_in_process(["plan", "demo", "--json"], workspace)
    assert proc.returncode == 0, proc.stderr
    docs = {doc["platform"]: doc for doc in json.loads(proc.stdout)["images"]}
    assert sorted(docs) == PLATFORMS
    return docs


def same_for_all(plans: dict, key: str):
    """The value of `key`, which every platform's plan must agree on."""
    values = [plans[p][key] for p in PLATFORMS]
    assert all(v == values[0] for v in values), values
    return values[0]


def build(workspace, *extra, env=None):
    proc = run_in_process(["image", "demo", *extra], workspace, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_the_demo_builds_and_an_immediate_second_run_calls_no_builder(built_demo, workspace):
    assert "demo (linux/amd64):" in built_demo.stdout
    for platform in ("linux/amd64", "linux/arm64"):  # the arm64 image's closure is read on this machine too
        assert f"runtime: demo ({platform}): runtime closure ok" in built_demo.stderr, built_demo.stderr
    proc = run_in_process(["image", "demo"], workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 0, proc.stderr
    assert "nothing to build" in proc.stdout
    plans = plan_json(workspace)
    assert same_for_all(plans, "components_to_build") == [] and same_for_all(plans, "layers_to_build") == []
    assert same_for_all(plans, "layers_to_write") == []


def test_a_script_edit_writes_one_layer_and_starts_no_builder(built_demo, workspace):
    before = layers("enginebuild/demo:latest")
    edit(workspace / "images/demo/launch_server.sh")
    plans = plan_json(workspace)
    assert same_for_all(plans, "components_to_build") == [] and same_for_all(plans, "layers_to_build") == []
    assert same_for_all(plans, "layers_to_write") == ["files /opt/enginebuild/bin/launch_server.sh"]
    for plan in plans.values():
        changed = next(row for row in plan["layers"] if row["action"] == "write")["changed"]
        assert changed == ["file images/demo/launch_server.sh"]
    before_arm64 = layers("enginebuild/demo:latest-arm64")
    proc = build(workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})  # a builder that cannot run proves none ran
    # one layer written; the other platform's image receives the same bytes (a file layer has no platform)
    assert proc.stdout.count("wrote 1 layer(s)") == 1
    after, after_arm64 = layers("enginebuild/demo:latest"), layers("enginebuild/demo:latest-arm64")
    assert len(after) == len(before)
    assert [a == b for a, b in zip(after, before, strict=False)] == [True] * (len(before) - 2) + [False, True]
    assert [a == b for a, b in zip(after_arm64, before_arm64, strict=False)] == [True] * (len(before_arm64) - 2) + [False, True]
    assert after[-2] == after_arm64[-2]


def test_a_runtime_system_package_builds_no_component(built_demo, workspace):
    spec = workspace / "images/demo/image.yaml"
    text = spec.read_text()
    assert "packages: [busybox-static, python3, libstdc++6]" in text
    spec.write_text(text.replace("packages: [busybox-static, python3, libstdc++6]",
                                 "packages: [busybox-static, python3, libstdc++6, jq]"))
    assert run_in_process(["lock", "demo"], workspace).returncode == 0
    assert same_for_all(plan_json(workspace), "components_to_build") == []
    proc = build(workspace)
    assert "component" not in proc.stdout.split("->")[0]
    assert docker("run", "--rm", "--entrypoint", "jq", "enginebuild/demo:latest", "--version").returncode == 0


def test_an_image_whose_binary_lacks_a_library_fails_image_and_verify_until_the_package_is_added(built_demo,
                                                                                                 workspace):
    spec = workspace / "images/demo/image.yaml"
    text = spec.read_text()
    spec.write_text(text.replace("packages: [busybox-static, python3, libstdc++6]",
                                 "packages: [busybox-static, python3]"))
    assert run_in_process(["lock", "demo"], workspace).returncode == 0
    failed = run_in_process(["image", "demo", "--platform", "linux/amd64"], workspace)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "the runtime-closure check failed" in failed.stderr
    assert "MISSING libstdc++.so.6, needed by /opt/enginebuild/lib/libdemo_cuda.so" in failed.stderr
    assert "libstdc++6" in failed.stderr  # the package Debian ships it in
    again = run_in_process(["image", "demo", "--platform", "linux/amd64"], workspace)  # no no-op answer hides it
    assert again.returncode == 1 and "MISSING libstdc++.so.6" in again.stderr
    verify = run_in_process(["verify", "demo", "--platform", "linux/amd64", "--json"], workspace)
    assert verify.returncode == 1
    runtime = json.loads(verify.stdout)["runtime"][0]
    assert {"path": "/opt/enginebuild/lib/libdemo_cuda.so", "library": "libstdc++.so.6"}.items() <= \
        runtime["missing"][0].items()
    spec.write_text(text)
    assert run_in_process(["lock", "demo"], workspace).returncode == 0
    fixed = build(workspace, "--platform", "linux/amd64")
    assert "runtime closure ok" in fixed.stderr
    assert run_in_process(["verify", "demo", "--platform", "linux/amd64"], workspace).returncode == 0


def test_imports_run_in_the_image_when_asked_and_a_broken_package_fails_naming_it(built_demo, workspace):
    spec = workspace / "images/demo/image.yaml"
    text = spec.read_text()
    broken = workspace / "images/demo/broken_tabulate.py"
    broken.write_text('raise ImportError("tabulate was replaced by a file of the recipe")\n')
    spec.write_text(text + "\nruntime-check:\n  imports: {env: {DEMO_MODE: check}}\n")
    proc = build(workspace, "--platform", "linux/amd64")
    assert "python: demo (linux/amd64): imports ok" in proc.stderr, proc.stderr
    verify = json.loads(run_in_process(["verify", "demo", "--platform", "linux/amd64", "--json"], workspace).stdout)
    imported = verify["imports"][0]["imported"]
    assert {"tabulate", "wcwidth"} <= set(imported), imported  # a requirement and what it needs
    # the image's own check passed for this image ID: verify answers from its record, and says so
    assert verify["imports"][0]["ok"] and verify["imports"][0]["recorded"], verify["imports"]
    said = run_in_process(["verify", "demo", "--platform", "linux/amd64"], workspace).stdout
    assert "demo (linux/amd64): imports ok (recorded when image sha256:" in said, said
    # the same image held to another check (its environment) is imported again
    spec.write_text(text + "\nruntime-check:\n  imports: {env: {DEMO_MODE: again}}\n")
    again = json.loads(run_in_process(["verify", "demo", "--platform", "linux/amd64", "--json"], workspace).stdout)
    assert again["imports"][0]["ok"] and not again["imports"][0]["recorded"], again["imports"]
    replaced = text.replace("files:\n", "files:\n  /usr/local/lib/python3.11/dist-packages/tabulate/__init__.py: "
                                         "broken_tabulate.py\n")
    spec.write_text(replaced + "\nruntime-check:\n  imports: {}\n")
    assert run_in_process(["lock", "demo"], workspace).returncode == 0
    failed = run_in_process(["image", "demo", "--platform", "linux/amd64"], workspace)
    assert failed.returncode == 1
    assert "FAILED import tabulate (tabulate): ImportError: tabulate was replaced by a file of the recipe" in \
        failed.stderr, failed.stderr
    spec.write_text(replaced + "\nruntime-check:\n  imports: {skip: [{name: tabulate, why: replaced on purpose}]}\n")
    skipped = build(workspace, "--platform", "linux/amd64")
    assert "python: demo (linux/amd64): imports ok" in skipped.stderr
    # the module's later tests run the demo image as its fixture built it
    spec.write_text(text)
    broken.unlink()
    assert run_in_process(["lock", "demo"], workspace).returncode == 0
    build(workspace, "--platform", "linux/amd64")


def test_a_runtime_python_requirement_bump_builds_no_component(built_demo, workspace):
    spec = workspace / "images/demo/image.yaml"
    spec.write_text(spec.read_text().replace('"tabulate[widechars]==0.9.0"', '"tabulate[widechars]==0.10.0"'))
    assert run_in_process(["lock", "demo"], workspace).returncode == 0
    plans = plan_json(workspace)
    assert same_for_all(plans, "components_to_build") == [] and same_for_all(plans, "layers_to_build") == []
    assert any("tabulate 0.10.0" in name for name in same_for_all(plans, "layers_to_write"))
    proc = build(workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert "built" not in proc.stdout
    out = docker("run", "--rm", "--entrypoint", "python3", "enginebuild/demo:latest", "-c",
                 "import tabulate; print(tabulate.__version__)").stdout
    assert out.strip() == "0.10.0"


def test_editing_a_components_patch_rebuilds_it_and_what_needs_it_nothing_else(built_demo, workspace):
    kernel = workspace / "images/demo/kernels/kernel.c"
    kernel.write_text(kernel.read_text() + "/* touched */\n")
    assert same_for_all(plan_json(workspace), "components_to_build") == ["kernels", "engine"]
    kernel.write_text(kernel.read_text().replace("/* touched */\n", ""))
    patch = workspace / "patches/demo-engine/0001-aux-layer-ids-off-by-one.patch"
    patch.write_text(patch.read_text().replace("Subject: demo-engine:", "Subject: demo-engine (edited):"))
    plans = plan_json(workspace)
    assert same_for_all(plans, "components_to_build") == ["engine"]
    assert same_for_all(plans, "layers_to_build") == []  # the runtime runs no command for it: outputs are copied
    proc = build(workspace)
    assert proc.stdout.count("built 1 component(s) (engine)") == 2


def test_a_patch_to_the_engines_python_part_builds_no_component(built_demo, workspace):
    """The demo's engine has a compiled part (`engine`, inputs: engine.c) and a Python part
    (`engine-py`, inputs: py/**, installed as they are) from one patched source: a patch reaching
    only the Python part is outside the compiled part's key, and is applied as files to what
    `engine-py` installs: no component is built, in the plan or in a real build."""
    marker = uuid.uuid4().hex[:8]
    patch = workspace / "patches/demo-engine/0002-settings-mounted.patch"
    patch.write_text(PY_PATCH.replace("MARK", marker))
    spec = workspace / "images/demo/image.yaml"
    stack = "      - demo-engine/0001-aux-layer-ids-off-by-one.patch\n"
    assert spec.read_text().count(stack) == 2  # the compiled part and the Python part share the stack
    spec.write_text(spec.read_text().replace(stack, stack + "      - demo-engine/0002-settings-mounted.patch\n"))
    plans = plan_json(workspace)
    assert same_for_all(plans, "components_to_build") == []
    text = run_in_process(["plan", "demo"], workspace).stdout
    assert "0002-settings-mounted.patch touches none of its declared inputs: not part of its key" in text, text
    assert "engine-py: 0002-settings-mounted.patch applied as files (1 file, " in text, text
    proc = build(workspace)
    for platform in PLATFORMS:
        assert f"demo ({platform}): wrote " in proc.stdout and f"demo ({platform}): built" not in proc.stdout, \
            proc.stdout
    said = proc.stdout + proc.stderr
    for name in ("engine", "engine-py", "kernels", "cuda-kernels"):  # reused: no build ran
        assert f"component {name}: built" not in said, said
    out = docker("run", "--rm", "--entrypoint", "demo-engine-settings", "enginebuild/demo:latest").stdout
    assert f"model folder (mounted) {marker}" in out


def test_the_demos_compiled_part_cannot_read_its_python_part(built_demo, workspace):
    """`engine` declares engine.c alone: a build script that reads py/ (not declared) fails,
    naming the file, instead of silently depending on it."""
    script = workspace / "images/demo/engine/build_engine.sh"
    script.write_text(script.read_text().replace("set -eu\n", "set -eu\nwc -c py/engine_settings.py\n", 1))
    proc = run_in_process(["image", "demo", "--platform", "linux/amd64"], workspace)
    assert proc.returncode == 1, proc.stdout
    assert "py/engine_settings.py" in proc.stderr and "No such file" in proc.stderr, proc.stderr


def test_the_image_carries_no_source_tree_or_build_directory_of_any_component(built_demo):
    names = []
    save = subprocess.run(["docker", "save", "enginebuild/demo:latest"], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(save.stdout)) as image:
        for member in image.getmembers():
            if member.name.endswith("/layer.tar"):
                with tarfile.open(fileobj=image.extractfile(member)) as layer:
                    names += layer.getnames()
    assert "usr/local/bin/demo-engine" in names
    offending = [n for n in names if n.startswith("opt/enginebuild/src") or n.startswith("opt/enginebuild/deps")
                 or n.endswith((".o", ".c", ".a")) or "/build/" in n or n.endswith("build_engine.sh")]
    assert offending == []


def test_plan_and_image_report_each_components_output_size(built_demo, workspace):
    for plan in plan_json(workspace).values():
        sizes = {c["name"]: c["output_size"] for c in plan["components"]}
        assert sizes["engine"] > 100_000 and sizes["kernels"] > 1_000 and sizes["cuda-kernels"] > 100_000
    # each size once per platform: as the component finished building, or, reused, after the image's line
    assert len(re.findall(r"component engine: (?:built in [\d.]+s, )?outputs \d", built_demo.stderr)) == 2, \
        built_demo.stderr


def test_the_image_runs_the_patched_engine_with_its_launcher(built_demo):
    name = f"eb-demo-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, "-e", "SERVED_MODEL_NAME=tiny", "enginebuild/demo:latest")
    try:
        waited = docker("exec", name, "/opt/enginebuild/bin/wait_for_server.sh", "http://127.0.0.1:8000", "30")
        assert "is up" in waited.stdout
        models = docker("exec", name, "wget", "-q", "-O", "-", "http://127.0.0.1:8000/v1/models").stdout
        assert json.loads(models)["data"][0]["id"] == "tiny"
        logs = docker("logs", name).stdout
        assert "aux_hidden_state_layers=(2, 17, 32, 47, 62)" in logs  # the patch was applied before the compile
        assert "launch_server.sh: demo-engine --model /models/demo-model --served-model-name tiny --port 8000" in logs
    finally:
        docker("rm", "-f", name, check=False)


def test_the_demo_stops_within_two_seconds_of_docker_stop(built_demo):
    name = f"eb-stop-{uuid.uuid4().hex[:8]}"
    docker("run", "-d", "--name", name, "enginebuild/demo:latest")
    try:
        docker("exec", name, "/opt/enginebuild/bin/wait_for_server.sh", "http://127.0.0.1:8000", "30")
        start = time.monotonic()
        docker("stop", name)
        took = time.monotonic() - start
        state = inspect_container(name)
    finally:
        docker("rm", "-f", name, check=False)
    assert took < 2.0, f"docker stop took {took:.1f}s"
    assert state["ExitCode"] == 0  # the engine handled SIGTERM; it was not killed


def inspect_container(name):
    return json.loads(docker("inspect", name).stdout)[0]["State"]


def test_python_imports_the_locked_requirement_and_pip_check_passes(built_demo, tmp_path):
    wheels = tmp_path / "pip"
    subprocess.run(["python3", "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "pip==24.3.1",
                    "-d", str(wheels)], check=True, capture_output=True)
    pip = next(wheels.glob("pip-*.whl")).name
    out = docker("run", "--rm", "-v", f"{wheels}:/pip:ro", "--entrypoint", "python3", "enginebuild/demo:latest",
                 f"/pip/{pip}/pip", "check").stdout
    assert "No broken requirements found." in out
    table = docker("run", "--rm", "--entrypoint", "python3", "enginebuild/demo:latest", "-c",
                   "import tabulate, wcwidth; print(wcwidth.wcwidth('中'))").stdout
    assert table.strip() == "2"


def test_a_missing_model_path_stops_the_launcher_with_a_clear_message(built_demo):
    proc = docker("run", "--rm", "-e", "MODEL_PATH=", "enginebuild/demo:latest", check=False)
    assert proc.returncode == 2
    assert "MODEL_PATH is not set" in proc.stderr


def test_the_image_carries_oci_labels_its_settings_and_a_manifest(built_demo):
    config = inspect("enginebuild/demo:latest")["Config"]
    labels = config["Labels"]
    lock = json.loads((ROOT / "lockfiles/demo.lock").read_text())
    assert labels["org.opencontainers.image.created"] == "1970-01-01T00:00:01Z" != lock["created"]  # the files' epoch
    assert labels["org.opencontainers.image.title"] == "demo"
    assert labels["org.enginebuild.patches"].startswith("demo-engine/0001-aux-layer-ids-off-by-one.patch@sha256:")
    assert config["StopSignal"] == "SIGTERM" and config["Healthcheck"]["Test"][0] == "CMD"
    manifest = json.loads(docker("run", "--rm", "--entrypoint", "cat", "enginebuild/demo:latest",
                                 "/opt/enginebuild/manifest.json").stdout)
    # the amd64 image names the inputs of its platform (and those of every platform)
    assert manifest["inputs"] == {k: v["resolved"] for k, v in lock["inputs"].items() if "@linux/arm64" not in k}


def test_a_patch_that_no_longer_applies_stops_the_build_before_anything_builds(built_demo, workspace):
    source = workspace / "images/demo/engine/engine.c"
    source.write_text(source.read_text().replace("return drafter_layer_id;",
                                                 f"return drafter_layer_id; /* {uuid.uuid4().hex} */"))
    proc = run_in_process(["image", "demo"], workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: patch demo-engine/0001-aux-layer-ids-off-by-one.patch does not apply to "
                                  "engine folder images/demo/engine (conflicts): engine.c: hunk 1 @@ -20,7 +20,7 @@: "
                                  "the source differs from the hunk's context")
    assert "builder:" not in proc.stderr


def test_the_legacy_builder_is_never_used(workspace, docker_engine):
    legacy = [path for path in ("/usr/local/bin/docker", "/usr/bin/docker") if shutil.which(path)
              and subprocess.run([path, "buildx", "version"], capture_output=True).returncode != 0
              and int(re.search(r"version (\d+)", subprocess.run([path, "--version"], capture_output=True,
                                                                  text=True).stdout).group(1)) >= 23]
    need(bool(legacy), "no docker client of 23.0 or later without buildx on this machine")
    edit(workspace / "images/demo/kernels/kernel.c", f"/* {uuid.uuid4().hex} */\n")
    proc = run_in_process(["image", "demo"], workspace, env={"ENGINEBUILD_DOCKER": legacy[0]})
    assert proc.returncode == 2
    assert "no BuildKit-capable docker client" in proc.stderr
    assert "never uses the legacy builder" in proc.stderr


def test_no_cache_builds_every_component_and_layer_again_as_docker_build_does(workspace, docker_engine):
    from helpers.specs import BUSYBOX_BUILDER, write_image

    marker = uuid.uuid4().hex[:8]
    write_image(workspace, "again", BUSYBOX_BUILDER + """components:
  part:
    source: {path: part}
    build: {script: part/build.sh}
    outputs: {paths: [/opt/part.txt]}
install: [part]
files: {/opt/note.txt: note.txt}
""", {"part/build.sh": f"#!/bin/sh\necho 'part {marker}' > /opt/part.txt\n", "note.txt": "a note\n"})
    first = run_in_process(["image", "again"], workspace)
    assert first.returncode == 0, first.stderr
    built = docker("image", "inspect", "--format", "{{.Id}}", "enginebuild/again:latest").stdout.strip()
    again = run_in_process(["image", "again", "--no-cache"], workspace)
    assert again.returncode == 0, again.stderr
    # the component, the builder's command layer and every written layer made again
    assert "built 1 component(s) (part)" in again.stdout and "ran 1 command layer(s)" in again.stdout
    assert "wrote" in again.stdout
    assert docker("image", "inspect", "--format", "{{.Id}}", "enginebuild/again:latest").stdout.strip() == built
    assert "nothing to build" in run_in_process(["image", "again"], workspace).stdout
    plan = run_in_process(["plan", "again", "--no-cache"], workspace)  # a build option, not a plan's
    assert plan.returncode == 2 and "unrecognized arguments: --no-cache" in plan.stderr


def test_the_demos_kernel_built_for_the_gpu_that_ran_it_is_the_library_that_ran(tmp_path, built_demo):
    """GPU ground truth for an image (tests/corpus/image-gpu-outcomes.json, recorded by
    scripts/gpu-truth/image.py): the demo built for 9.0, its filesystem as the root of a chroot
    on an NVIDIA H200 with the driver's libcuda.so.1 where the container toolkit mounts it, the
    image's own Python loaded the library and ran the RMS normalisation, matching the CPU. That
    outcome holds for what the demo builds now: the same build gives the library, byte for byte,
    that ran (a change to the kernel, its flags or its toolchain makes this fail until the
    outcome is recorded again)."""
    import hashlib

    outcome = json.loads((ROOT / "tests/corpus/image-gpu-outcomes.json").read_text())
    assert outcome["loaded"] is True and outcome["launch_error"] == 0 and outcome["max_abs_diff"] < 1e-5
    assert outcome["machine"]["compute_capability"] == "9.0"
    out = tmp_path / "fs"
    proc = run_in_process(["image", "demo", "--platform", "linux/amd64", "--set", 'cuda-archs=["9.0"]', "--output", str(out),
                    "-t", "enginebuild/demo:gpu-truth-test"], ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    library = out / outcome["library"].lstrip("/")
    assert hashlib.sha256(library.read_bytes()).hexdigest() == outcome["sha256"]
    docker("rmi", "-f", "enginebuild/demo:gpu-truth-test", check=False)


@pytest.mark.parametrize("platform", ["linux/amd64", "linux/arm64"])
def test_the_demos_cuda_library_loads_in_its_own_image(built_demo, platform):
    """What we ship must load where it ships: the kernel library nvcc links needs libstdc++ and
    libgcc_s, which the runtime ships; loaded by the image's own Python (ctypes, the dynamic
    loader of the image), not read. arm64 runs under qemu here. Without a GPU nothing is called."""
    tag = "enginebuild/demo:latest" if platform == "linux/amd64" else "enginebuild/demo:latest-arm64"
    code = "import ctypes; ctypes.CDLL('/opt/enginebuild/lib/libdemo_cuda.so'); print('loaded')"
    proc = docker("run", "--rm", "--platform", platform, "--entrypoint", "python3", tag, "-c", code, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "loaded", proc.stderr[-2000:]
