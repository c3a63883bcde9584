"""Patches applied as files, on the demo for real: the image made with a Python patch applied as
files holds, path for path, the bytes and modes of the image made with the patch in the
component's build (`patches-as-files: false`); an edit of that patch writes one layer and builds
nothing; a patch of a file the build rewrites is found out from the bytes and goes into the
build, and `plan` names the file from then on. What a build learns is written beside the lock
(lockfiles/demo.routes.json), so a fresh machine with the same checkout plans the same keys."""
import json
import uuid

import pytest

from helpers.docker import docker, filesystem
from helpers.inprocess import run_in_process
from helpers.specs import PY_PATCH

pytestmark = [pytest.mark.docker, pytest.mark.network]

NAME = "demo-engine/0002-settings-mounted.patch"
AMD64 = ("--platform", "linux/amd64")


def with_python_patch(workspace, marker: str) -> None:
    (workspace / "patches" / NAME).write_text(PY_PATCH.replace("MARK", marker))
    spec = workspace / "images/demo/image.yaml"
    stack = "      - demo-engine/0001-aux-layer-ids-off-by-one.patch\n"
    text = spec.read_text()
    if NAME not in text:  # the Python part's stack (the second one: engine, then engine-py)
        head, _, tail = text.rpartition(stack)
        spec.write_text(head + stack + f"      - {NAME}\n" + tail)


def image(workspace, tag: str, *extra):
    proc = run_in_process(["image", "demo", *AMD64, "-t", tag, *extra], workspace)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def settings(tag: str) -> str:
    return docker("run", "--rm", "--entrypoint", "demo-engine-settings", "-e", "MODEL_PATH=/m", tag).stdout


def planned(workspace, home=None) -> list:
    """What a plan decides (each component's key and routes, each layer's key), not what this
    machine holds of it."""
    proc = run_in_process(["plan", "demo", *AMD64, "--json"], workspace,
                          env={"ENGINEBUILD_HOME": str(home)} if home else None)
    assert proc.returncode == 0, proc.stderr
    (doc,) = json.loads(proc.stdout)["images"]
    return [(c["name"], c["key"], c.get("patch_routes")) for c in doc["components"]] + \
        [(layer["name"], layer["key"]) for layer in doc["layers"]]


def routes_file(workspace) -> list:
    doc = json.loads((workspace / "lockfiles/demo.routes.json").read_text())
    return [(c["component"], c["platform"], c["verbatim"]) for c in doc["components"]]


def test_a_python_patch_applied_as_files_gives_the_image_the_build_gives(workspace, docker_engine, debian_reachable,
                                                                       pypi_reachable, tmp_path):
    marker = uuid.uuid4().hex[:8]
    with_python_patch(workspace, marker)
    plan = run_in_process(["plan", "demo", *AMD64], workspace).stdout
    assert "engine-py: 0002-settings-mounted.patch applied as files (1 file, " in plan, plan
    files_tag, build_tag = (f"enginebuild-test/patch-files:{n}-{marker}" for n in ("files", "build"))
    image(workspace, files_tag)
    assert f"model folder (mounted) {marker}" in settings(files_tag)  # run, through the command's link
    # learned from the bytes before the image was built, and written beside the lock: the plan says
    # so without "not yet in the routes file", and a fresh machine (an empty home) plans the same keys
    assert routes_file(workspace) == [("engine-py", "linux/amd64", {"py/engine_settings.py": True})]
    plan = run_in_process(["plan", "demo", *AMD64], workspace).stdout
    assert "0002-settings-mounted.patch applied as files (1 file, " in plan and "not yet in the routes file" not in plan
    assert planned(workspace) == planned(workspace, tmp_path / "fresh-home")
    assert ". patches of engine-py as files (0002-settings-mounted.patch) " in plan  # the layer's name whole

    # an edit of the patch: no component built, the layer of patched files written again
    again = uuid.uuid4().hex[:8]
    with_python_patch(workspace, again)
    edited = image(workspace, files_tag)
    assert "demo (linux/amd64): wrote " in edited.stdout and "built" not in edited.stdout.split("demo (linux/amd64)")[1]
    assert "component engine-py: built" not in edited.stdout + edited.stderr
    assert f"model folder (mounted) {again}" in settings(files_tag)
    # the kernel and closure checks read nothing in a layer of Python files: the verdict on the
    # other layers answers (registrycache/inert.py); `verify` below reads every layer again
    said = edited.stdout + edited.stderr
    assert "kernels: demo (linux/amd64): ok" in said and "runtime: demo (linux/amd64): runtime closure ok" in said \
        and "(the verdict kept when the layers these checks read were checked)" in said, said
    verified = run_in_process(["verify", "demo", *AMD64], workspace)
    assert "demo (linux/amd64): patches applied as files: 1 of 1 file(s) as the patch stack makes them: ok" \
        in verified.stdout, verified.stdout
    # exported for `docker buildx bake`: the component's stage without the patch, then the patched files
    baked = workspace.parent / "baked"
    assert run_in_process(["render", "demo", *AMD64, "--bake", str(baked)], workspace).returncode == 0
    runtime = (baked / "linux-amd64/Dockerfile").read_text().split("AS runtime\n", 1)[1].splitlines()
    at = runtime.index("# patches of engine-py as files (0002-settings-mounted.patch): the layer enginebuild wrote")
    copy = max(i for i, line in enumerate(runtime[:at]) if line.startswith("COPY --from=component-engine-py "))
    between = runtime[copy + 1:at]  # only the bytecode of the layers below, which an edit leaves alone
    assert len(between) == 2 and between[0].startswith("# bytecode (Python") and between[1].startswith("ADD layers/")
    assert runtime[at + 1].startswith("ADD layers/")

    # the same stack in the component's build
    into = run_in_process(["plan", "demo", *AMD64, "--set", "components.engine-py.patches-as-files=false"], workspace)
    assert "engine-py: 0002-settings-mounted.patch into the build: patches-as-files: false" in into.stdout, into.stdout
    built = image(workspace, build_tag, "--set", "components.engine-py.patches-as-files=false")
    assert "built 1 component(s) (engine-py)" in built.stdout, built.stdout
    ours, theirs = filesystem(files_tag), filesystem(build_tag)
    assert sorted(set(ours) ^ set(theirs)) == []
    assert {path: (ours[path], theirs[path]) for path in ours if ours[path] != theirs[path]} == {}
    docker("rmi", files_tag, build_tag, check=False)

    # a later layer that puts other bytes where a patched file is: verify names it
    spec = workspace / "images/demo/image.yaml"
    spec.write_text(spec.read_text().replace("files:\n", "files:\n  /opt/demo-engine/py/engine_settings.py: "
                                                        "wait_for_server.sh\n", 1))
    image(workspace, files_tag)
    verified = run_in_process(["verify", "demo", *AMD64], workspace)
    assert verified.returncode == 1
    assert "FAILED /opt/demo-engine/py/engine_settings.py (engine-py): layer files /opt/demo-engine/py/engine_settings" \
        ".py holds other bytes than the patch stack makes" in verified.stdout, verified.stdout
    docker("rmi", files_tag, check=False)


def test_a_python_file_the_build_rewrites_is_found_out_and_its_patch_goes_into_the_build(workspace, docker_engine,
                                                                                          debian_reachable, pypi_reachable,
                                                                                          tmp_path):
    marker = uuid.uuid4().hex[:8]
    script = workspace / "images/demo/engine/build_engine_py.sh"
    script.write_text(script.read_text().replace(
        "cp py/engine_settings.py /opt/demo-engine/py/engine_settings.py",
        "{ cat py/engine_settings.py; echo '# packaged by build_engine_py.sh'; } > /opt/demo-engine/py/engine_settings.py"))
    with_python_patch(workspace, marker)
    tag = f"enginebuild-test/patch-files:rewritten-{marker}"
    proc = image(workspace, tag)
    said = proc.stdout + proc.stderr
    assert "engine-py: py/engine_settings.py is not installed verbatim by its build: written to " \
        "lockfiles/demo.routes.json; its patch goes into the component's build" in said, said
    assert f"model folder (mounted) {marker}" in settings(tag)
    assert routes_file(workspace) == [("engine-py", "linux/amd64", {"py/engine_settings.py": False})]
    plan = run_in_process(["plan", "demo", *AMD64], workspace).stdout
    assert "engine-py: 0002-settings-mounted.patch into the build: py/engine_settings.py is not installed verbatim" \
        in plan, plan
    # the checkout decides, not what this machine learned: a fresh home plans the same, and
    # without the routes file this machine plans as a fresh checkout does (the patch as files)
    assert planned(workspace) == planned(workspace, tmp_path / "fresh-home")
    (workspace / "lockfiles/demo.routes.json").unlink()
    plan = run_in_process(["plan", "demo", *AMD64], workspace).stdout
    assert "0002-settings-mounted.patch applied as files (1 file, " in plan and "not yet in the routes file" in plan
    # `lock --routes` learns it again, here from what the store kept (no build): the file is back
    relearnt = run_in_process(["lock", "demo", "--routes", *AMD64], workspace)
    assert relearnt.returncode == 0, relearnt.stdout + relearnt.stderr
    assert "a patch goes into its component's build on linux/amd64" in relearnt.stdout, relearnt.stdout
    assert routes_file(workspace) == [("engine-py", "linux/amd64", {"py/engine_settings.py": False})]
    # a routes file edited to say otherwise than the bytes this machine read: written back, and built right
    routes = workspace / "lockfiles/demo.routes.json"
    routes.write_text(routes.read_text().replace('"py/engine_settings.py": false', '"py/engine_settings.py": true'))
    edited = routes.read_bytes()
    # with --locked the routes file is an input like the lock: refused, naming it, nothing written
    refused = run_in_process(["image", "demo", *AMD64, "--locked", "-t", tag], workspace)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert "lockfiles/demo.routes.json: component engine-py (linux/amd64): the routes file would change: " \
        "py/engine_settings.py: said true, found false" in refused.stderr, refused.stderr
    assert "lock demo --routes` and commit lockfiles/demo.routes.json" in refused.stderr, refused.stderr
    assert routes.read_bytes() == edited
    said = image(workspace, tag).stderr
    assert "engine-py: py/engine_settings.py is not installed verbatim by its build (it said verbatim): written " \
        "to lockfiles/demo.routes.json" in said, said
    assert routes_file(workspace) == [("engine-py", "linux/amd64", {"py/engine_settings.py": False})]
    assert f"model folder (mounted) {marker}" in settings(tag)
    docker("rmi", tag, check=False)


def test_every_name_of_a_hard_linked_output_file_gets_the_patched_bytes(workspace, docker_engine, debian_reachable,
                                                                        pypi_reachable):
    """A build that installs the patched file under two names (a hard link: `ln`, `cp -l`, an
    installer's dedup) gets the patch at both, as the build with the patch in it would."""
    marker = uuid.uuid4().hex[:8]
    script = workspace / "images/demo/engine/build_engine_py.sh"
    script.write_text(script.read_text().replace(
        "chmod 0755 /usr/local/bin/demo-engine-settings",
        "chmod 0755 /usr/local/bin/demo-engine-settings\n"
        "ln /opt/demo-engine/py/engine_settings.py /opt/demo-engine/py/engine_settings_alias.py"))
    with_python_patch(workspace, marker)
    tag = f"enginebuild-test/patch-files:linked-{marker}"
    try:
        proc = image(workspace, tag)
        assert "into the build" not in proc.stdout + proc.stderr  # applied as files
        plan = run_in_process(["plan", "demo", *AMD64], workspace).stdout
        assert "engine-py: 0002-settings-mounted.patch applied as files (1 file, " in plan, plan
        for name in ("engine_settings.py", "engine_settings_alias.py"):
            text = docker("run", "--rm", "--entrypoint", "/bin/cat", tag, f"/opt/demo-engine/py/{name}").stdout
            assert f"model folder (mounted) {marker}" in text, name
    finally:
        docker("rmi", tag, check=False)
