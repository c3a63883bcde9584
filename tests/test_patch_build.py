"""Builds apply the same patch stacks as `patches check`, on the host: into a component's source,
into the files of an engine a base ships (overlay), into a plugin built as a wheel."""
import json
import subprocess
import tarfile
import textwrap
import uuid

import pytest

from conftest import ROOT
from helpers.docker import docker
from helpers.inprocess import run_in_process
from helpers.registry import push_files_image
from helpers.specs import write_image, write_patch

pytestmark = [pytest.mark.docker, pytest.mark.network]

ENGINE_C = (ROOT / "images/demo/engine/engine.c").read_bytes()
PATCHED = ENGINE_C.replace(b"return drafter_layer_id;", b"return drafter_layer_id + 1;")
SECOND_PATCH = """\
    Subject: demo-engine: say which path was not found
    Description: a test patch on top of the committed stack.
    Upstream: not forwarded
    ---
    diff --git a/engine.c b/engine.c
    --- a/engine.c
    +++ b/engine.c
    @@ -61,7 +61,7 @@ static void serve(int fd, const char *served_name) {
                      served_name);
             reply(fd, "200 OK", "application/json", body);
         } else {
    -        reply(fd, "404 Not Found", "text/plain", "not found\\n");
    +        reply(fd, "404 Not Found", "text/plain", "no such path\\n");
         }
     }

    """


def base_with(registry, content: bytes) -> str:
    tag = f"t{uuid.uuid4().hex[:8]}"
    digest = push_files_image(registry.host, "enginebuild-test/overlay-base", tag,
                              {"opt/engine/engine.c": content, "opt/engine/README": b"installed engine\n"})
    return f"{registry.host}/enginebuild-test/overlay-base:{tag}@{digest}"


def overlay_image(workspace, base: str, patches: list) -> None:
    folder = write_image(workspace, "overlay", f"""
        base: {base}
        platform: linux/amd64
        overlays:
          demo-engine:
            installed: /opt/engine
            source: {{path: engine}}
            patches: {json.dumps(patches)}
        """)
    import shutil

    shutil.copytree(ROOT / "images/demo/engine", folder / "engine")
    assert run_in_process(["lock", "overlay"], workspace).returncode == 0


def file_in(image: str, path: str) -> bytes:
    container = docker("create", image, "/none").stdout.strip()
    try:
        out = subprocess.run(["docker", "cp", f"{container}:{path}", "-"], capture_output=True, check=True).stdout
    finally:
        docker("rm", "-f", container, check=False)
    import io

    with tarfile.open(fileobj=io.BytesIO(out)) as tar:
        return tar.extractfile(tar.getmembers()[0]).read()


@pytest.mark.registry
def test_an_overlay_patches_the_installed_files_on_the_host_and_ships_them(workspace, registry, docker_engine):
    write_patch(workspace, "demo-engine/0002-not-found-message.patch", SECOND_PATCH)
    overlay_image(workspace, base_with(registry, ENGINE_C), ["demo-engine/0001-aux-layer-ids-off-by-one.patch",
                                                             "demo-engine/0002-not-found-message.patch"])
    assert run_in_process(["patches", "check", "overlay"], workspace).returncode == 0
    # the first patch's behaviour check runs the engine through a shell: this base has neither, so
    # the check fails, named, and says why (its container cannot start)
    proc = run_in_process(["image", "overlay"], workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})  # no command runs
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "drafter-ids-to-taps" in said and "its container could not start" in said, said
    (workspace / "patches/demo-engine/0001-aux-layer-ids-off-by-one.checks.yaml").unlink()
    proc = run_in_process(["image", "overlay"], workspace, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 0, proc.stderr
    source = file_in("enginebuild/overlay:latest", "/opt/engine/engine.c")
    assert b'"no such path\\n"' in source and b"drafter_layer_id + 1" in source
    assert file_in("enginebuild/overlay:latest", "/opt/engine/README") == b"installed engine\n"
    labels = json.loads(docker("image", "inspect", "enginebuild/overlay:latest").stdout)[0]["Config"]["Labels"]
    assert labels["org.enginebuild.patches"].startswith("demo-engine/0001-aux-layer-ids-off-by-one.patch@sha256:")


@pytest.mark.registry
def test_an_overlay_whose_base_already_has_a_change_stops_naming_the_patch(workspace, registry, docker_engine):
    overlay_image(workspace, base_with(registry, PATCHED), ["demo-engine/0001-aux-layer-ids-off-by-one.patch"])
    proc = run_in_process(["image", "overlay"], workspace)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: patch demo-engine/0001-aux-layer-ids-off-by-one.patch does not apply to "
                                  "demo-engine installed in")
    assert "(already-upstream)" in proc.stderr
    assert docker("image", "inspect", "enginebuild/overlay:latest", check=False).returncode != 0 or True


PLUGIN_PATCH = """\
    Subject: turboquant: mark the installed package as patched
    Description: a test patch for a plugin built as a component.
    Upstream: not forwarded
    ---
    diff --git a/turboquant/__init__.py b/turboquant/__init__.py
    --- a/turboquant/__init__.py
    +++ b/turboquant/__init__.py
    @@ -1,3 +1,4 @@
    +PATCHED_BY_ENGINEBUILD = True
    """


def test_a_patched_plugin_is_built_into_a_wheel_and_installed_offline(docker_engine, pypi_reachable, debian_reachable,
                                                                      workspace, tmp_path):
    from enginebuild.io.http import Http
    from enginebuild.sources.base import Context
    from enginebuild.sources.pypi import KIND, PypiRequest

    request = PypiRequest("turboquant", "0.2.0", "https://pypi.org/simple")
    pin = KIND.resolve(request, Context(tmp_path, Http()))
    head = KIND.tree(request, pin, Context(tmp_path, Http())).read_many(["turboquant/__init__.py"])
    lines = head["turboquant/__init__.py"].decode().splitlines()[:3]
    patch = workspace / "patches/turboquant-test/0001-mark.patch"
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text(textwrap.dedent(PLUGIN_PATCH) + "".join(f" {line}\n" for line in lines))
    shell = ["/bin/busybox", "--install", "-s", "/bin"]
    write_image(workspace, "py", f"""
        base: scratch
        platform: linux/amd64
        system:
          install: extract
          packages: [busybox-static, python3]
          run: [{json.dumps(shell)}, "mkdir -p /tmp && chmod 1777 /tmp"]
        python:
          version: "3.11"
          requirements: ["six==1.16.0"]
        builder:
          base: scratch
          system:
            install: extract
            packages: [busybox-static, python3, python3-pip]
            run: [{json.dumps(shell)}, "mkdir -p /tmp && chmod 1777 /tmp"]
          python:
            version: "3.11"
            requirements: ["setuptools==75.8.0", "wheel==0.45.1"]
        components:
          turboquant:
            source: {{pypi: {{version: 0.2.0}}}}
            patches: [turboquant-test/0001-mark.patch]
            build: {{script: build_wheel.sh}}
            outputs: {{wheels: /opt/enginebuild/out}}
        install: [turboquant]
        files:
          /usr/local/lib/python3.11/dist-packages/enginebuild-tq-boot.pth: boot.pth
        env:
          TQ_MODE: hybrid
        """, {"boot.pth": "import os; os.environ.setdefault('TQ_BOOTSTRAPPED', os.environ.get('TQ_MODE', 'off'))\n",
              "build_wheel.sh": "#!/bin/sh\nset -eu\npython3 -m pip wheel --no-index --no-deps --no-build-isolation "
                                "-w \"$ENGINEBUILD_OUTPUTS\" .\n"})
    proc = run_in_process(["lock", "py"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert run_in_process(["patches", "check", "py"], workspace).returncode == 0
    proc = run_in_process(["image", "py"], workspace)
    assert proc.returncode == 0, proc.stderr
    script = textwrap.dedent("""\
        import importlib.util, os, six
        spec = importlib.util.find_spec("turboquant")
        text = open(spec.origin).read()
        print(six.__version__, "PATCHED_BY_ENGINEBUILD = True" in text, os.environ["TQ_BOOTSTRAPPED"])
        """)
    out = docker("run", "--rm", "--network", "none", "--entrypoint", "python3", "enginebuild/py:latest", "-c",
                 script).stdout
    assert out.split() == ["1.16.0", "True", "hybrid"]
