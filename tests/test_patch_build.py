"""Builds apply the same patch stacks: into a source tree, an installed package (overlay), a plugin."""
import json
import shutil
import textwrap
import uuid

import pytest
from conftest import ROOT, run_cli
from helpers.docker import docker
from helpers.specs import write_image, write_patch

pytestmark = [pytest.mark.docker, pytest.mark.network]

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


@pytest.fixture(scope="module")
def demo_in_registry(docker_engine, registry, debian_reachable):
    """The demo image, built and pushed to the session registry, as a base for overlay images."""
    assert run_cli(["image", "demo"], ROOT).returncode == 0
    tag = f"overlay-base-{uuid.uuid4().hex[:8]}"
    docker("tag", "enginebuild/demo:latest", f"{registry.host}/enginebuild/demo:{tag}")
    docker("push", f"{registry.host}/enginebuild/demo:{tag}")
    return f"{registry.host}/enginebuild/demo:{tag}"


def overlay_image(workspace, base, patches):
    folder = write_image(workspace, "overlay", f"""
        base: {base}
        platform: linux/amd64
        engine:
          name: demo-engine
          source: {{path: engine}}
          installed: /opt/enginebuild/src/demo-engine
        patches: {json.dumps(patches)}
        """)
    shutil.copytree(ROOT / "images/demo/engine", folder / "engine")
    assert run_cli(["lock", "overlay"], workspace).returncode == 0


def test_an_overlay_applies_its_stack_inside_the_installed_engine(demo_in_registry, workspace):
    write_patch(workspace, "demo-engine/0002-not-found-message.patch", SECOND_PATCH)
    # the check runs against the upstream source; 0001 then 0002 apply there
    overlay_image(workspace, demo_in_registry, ["demo-engine/0001-aux-layer-ids-off-by-one.patch",
                                                "demo-engine/0002-not-found-message.patch"])
    assert run_cli(["patches", "check", "overlay"], workspace).returncode == 0
    # the installed tree already carries 0001: inside the image it does not apply, and the build says so
    proc = run_cli(["image", "overlay"], workspace)
    assert proc.returncode == 1
    assert "stage overlay/patches failed" in proc.stderr
    assert ("enginebuild: patch demo-engine__0001-aux-layer-ids-off-by-one.patch does not apply to "
            "/opt/enginebuild/src/demo-engine") in proc.stderr


def test_an_overlay_stack_that_fits_the_installed_tree_builds_and_is_recorded(demo_in_registry, workspace):
    write_patch(workspace, "demo-engine/0002-not-found-message.patch", SECOND_PATCH)
    overlay_image(workspace, demo_in_registry, ["demo-engine/0002-not-found-message.patch"])
    proc = run_cli(["image", "overlay"], workspace)
    assert proc.returncode == 0, proc.stderr
    source = docker("run", "--rm", "--entrypoint", "cat", "enginebuild/overlay:latest",
                    "/opt/enginebuild/src/demo-engine/engine.c").stdout
    assert '"no such path\\n"' in source and "drafter_layer_id + 1" in source
    labels = json.loads(docker("image", "inspect", "enginebuild/overlay:latest").stdout)[0]["Config"]["Labels"]
    assert labels["org.enginebuild.patches"].startswith("demo-engine/0002-not-found-message.patch@sha256:")


PLUGIN_PATCH = """\
    Subject: turboquant: mark the installed package as patched
    Description: a test patch for the plugin stage.
    Upstream: not forwarded
    ---
    diff --git a/turboquant/__init__.py b/turboquant/__init__.py
    --- a/turboquant/__init__.py
    +++ b/turboquant/__init__.py
    @@ -1,3 +1,4 @@
    +PATCHED_BY_ENGINEBUILD = True
    """


def test_python_requirements_and_a_patched_plugin_install_offline(docker_engine, pypi_reachable, debian_reachable,
                                                                   workspace, tmp_path):
    # the plugin patch is written against the real turboquant 0.2.0 sdist's first lines
    import tarfile

    from enginebuild.http import Http
    from enginebuild.resolve.pypi import PyPI
    from enginebuild.store import Store

    pin = PyPI(Http()).resolve_sdist("turboquant", "0.2.0")
    archive = Store(tmp_path).fetch(Http(), pin["url"], pin["sha256"], pin["filename"])
    with tarfile.open(archive) as tar:
        head = tar.extractfile("turboquant-0.2.0/turboquant/__init__.py").read().decode().splitlines()[:3]
    patch = workspace / "patches/turboquant-test/0001-mark.patch"
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text(textwrap.dedent(PLUGIN_PATCH) + "".join(f" {line}\n" for line in head))
    write_image(workspace, "py", """
        base: scratch
        platform: linux/amd64
        system:
          install: extract
          packages: [busybox-static, python3, python3-pip]
          run:
            - ["/bin/busybox", "--install", "-s", "/bin"]
            - "mkdir -p /tmp && chmod 1777 /tmp && rm -f /usr/lib/python3.11/EXTERNALLY-MANAGED"
        python:
          version: "3.11"
          requirements: ["six==1.16.0"]
        plugins:
          - name: turboquant
            source: {pypi: {version: 0.2.0}}
            patches: [turboquant-test/0001-mark.patch]
            files:
              /usr/local/lib/python3.11/dist-packages/enginebuild-tq-boot.pth: boot.pth
        env:
          TQ_MODE: hybrid
        """, {"boot.pth": "import os; os.environ.setdefault('TQ_BOOTSTRAPPED', os.environ.get('TQ_MODE', 'off'))\n"})
    assert run_cli(["lock", "py"], workspace).returncode == 0
    plan = json.loads(run_cli(["plan", "py", "--json"], workspace).stdout)
    assert [s["stage"] for s in plan["stages"]] == ["system", "python", "plugins", "files"]
    assert run_cli(["patches", "check", "py"], workspace).returncode == 0
    proc = run_cli(["image", "py"], workspace)
    assert proc.returncode == 0, proc.stderr
    script = textwrap.dedent("""\
        import importlib.util, os, six
        spec = importlib.util.find_spec("turboquant")
        text = open(spec.origin).read()
        print(six.__version__, "PATCHED_BY_ENGINEBUILD = True" in text, os.environ["TQ_BOOTSTRAPPED"])
        """)
    out = docker("run", "--rm", "--network", "none", "enginebuild/py:latest", "python3", "-c", script).stdout
    assert out.split() == ["1.16.0", "True", "hybrid"]
