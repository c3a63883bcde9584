"""`release:` components: a component's output taken from a released wheel (the file of that
release for each target platform, as an installer would choose it, pinned by sha256), built
nowhere; what needs it finds the wheel where a build would have left it. A real index on
127.0.0.1 serves the wheels."""
from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import textwrap

import pytest

from helpers.inprocess import run_in_process
from helpers.pyindex import Index, make_wheel
from helpers.specs import BUSYBOX_BUILDER, write_image, write_patch

FILES = ("kern-1.0-cp38-abi3-manylinux_2_24_x86_64.whl",  # an older build of the same release
         "kern-1.0-1-cp38-abi3-manylinux_2_24_x86_64.whl",  # build 1: the one an installer takes
         "kern-1.0-1-cp38-abi3-manylinux_2_24_aarch64.whl",
         "kern-1.0-cp38-abi3-win_amd64.whl",
         "kern-1.1-cp38-abi3-manylinux_2_24_x86_64.whl")


@pytest.fixture
def index(tmp_path):
    served = Index(tmp_path / "index")
    for name in FILES:  # each file its own bytes, so which one arrived can be told
        wheel = make_wheel(tmp_path / "made" / name, "kern", "1.0", files={"kern/which.txt": name})
        shutil.move(wheel, tmp_path / "made" / name / name)
        served.add("kern", tmp_path / "made" / name / name)
    yield served
    served.stop()


def _release_image(workspace, index, platforms: str) -> None:
    """An image whose runtime installs the release's wheel of `kern` 1.0."""
    write_image(workspace, "rel", f"""
        base: scratch
        platforms: [{platforms}]
        python: {{version: "3.11"}}
        components:
          kern:
            release: {{name: kern, version: "1.0", index: "{index.url}"}}
        install: [kern]
        """)


def _sha(index, name):
    return hashlib.sha256((index.folder / "files" / name).read_bytes()).hexdigest()


def test_the_lock_pins_each_platforms_wheel_of_that_release_and_plan_builds_nothing(workspace, index):
    _release_image(workspace, index, "linux/amd64, linux/arm64")
    proc = run_in_process(["lock", "rel"], workspace)
    assert proc.returncode == 0, proc.stderr
    lock = json.loads((workspace / "lockfiles/rel.lock").read_text())["inputs"]
    amd64, arm64 = (lock[f"components.kern.release@linux/{a}"]["resolved"] for a in ("amd64", "arm64"))
    assert (amd64["filename"], amd64["sha256"]) == (FILES[1], _sha(index, FILES[1]))
    assert (arm64["filename"], arm64["sha256"]) == (FILES[2], _sha(index, FILES[2]))
    assert "components.kern.builder" not in json.dumps(lock)  # it builds on nothing
    plan = run_in_process(["plan", "rel", "--platform", "linux/arm64"], workspace)
    assert plan.returncode == 0, plan.stderr
    assert "component kern" in plan.stdout and "outputs of kern (wheels)" in plan.stdout
    render = run_in_process(["render", "rel", "--platform", "linux/arm64"], workspace)
    assert render.returncode == 0, render.stderr
    assert f"COPY release/{FILES[2]} /opt/enginebuild/out/" in render.stdout


def test_a_release_with_no_wheel_for_a_platform_is_refused_naming_what_it_has(workspace, index):
    _release_image(workspace, index, "linux/ppc64le")
    proc = run_in_process(["lock", "rel"], workspace)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "kern 1.0" in proc.stderr and "linux/ppc64le" in proc.stderr and FILES[1] in proc.stderr
    assert "Traceback" not in proc.stderr


PATCH = """\
    Subject: a kernel change
    Description: changes the compiled part.
    Upstream: not yet

    diff --git a/csrc/k.cu b/csrc/k.cu
    --- a/csrc/k.cu
    +++ b/csrc/k.cu
    @@ -1 +1 @@
    -int k = 1;
    +int k = 2;
    """


@pytest.mark.parametrize("inputs, refused", [('["csrc/**"]', True), ("[]", True), ('["cmake/**"]', False)])
def test_a_patch_reaching_what_the_release_compiled_is_refused(workspace, index, inputs, refused):
    write_patch(workspace, "kern/0001-k.patch", PATCH)
    (workspace / "images/rel/src/csrc").mkdir(parents=True)
    (workspace / "images/rel/src/csrc/k.cu").write_text("int k = 1;\n")
    write_image(workspace, "rel", f"""
        base: scratch
        python: {{version: "3.11"}}
        components:
          kern:
            source: {{path: src}}
            inputs: {inputs}
            patches: [kern/0001-k.patch]
            build: {{script: build.sh}}
            release: {{name: kern, version: "1.0", index: "{index.url}"}}
        install: [kern]
        """, {"build.sh": "#!/bin/sh\ntrue\n"})
    proc = run_in_process(["render", "rel", "--unpinned"], workspace)
    if refused:
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "images/rel/image.yaml:" in proc.stderr and "components.kern.release" in proc.stderr
        assert "patches/kern/0001-k.patch changes csrc/k.cu" in proc.stderr
        assert "Traceback" not in proc.stderr
    else:  # the build and its patches are not used: the release is the output
        assert proc.returncode == 0, proc.stderr
        assert "components.kern.release@linux/" in proc.stdout  # what `lock` resolves, not its source
        assert "components.kern.source" not in proc.stdout


def test_a_release_component_needing_another_is_refused(workspace, index):
    write_image(workspace, "rel", textwrap.dedent(f"""
        base: scratch
        components:
          a:
            build: {{script: build.sh}}
            outputs: {{paths: [/opt/a]}}
          kern:
            needs: [a]
            release: {{name: kern, version: "1.0", index: "{index.url}"}}
        install: []
        """), {"build.sh": "#!/bin/sh\ntrue\n"})
    proc = run_in_process(["render", "rel", "--unpinned"], workspace)
    assert proc.returncode == 2
    assert "components.kern.needs" in proc.stderr and "builds nothing" in proc.stderr


def test_a_component_built_around_the_release_gets_its_exact_wheel(workspace, index, tmp_path, docker_engine,
                                                                    debian_reachable):
    """The shape of vLLM's precompiled route: a package component needs the kernels component
    and finds the release's wheel at $ENGINEBUILD_DEP_<NAME>, byte for byte."""
    write_image(workspace, "rel", BUSYBOX_BUILDER + f"""
components:
  kernels:
    release: {{name: kern, version: "1.0", index: "{index.url}"}}
  package:
    needs: [kernels]
    build: {{script: build.sh}}
    outputs: {{paths: [/opt/package]}}
install: [package]
""", {"build.sh": '#!/bin/sh\nset -e\nmkdir -p /opt/package\ncp "$ENGINEBUILD_DEP_KERNELS"/*.whl /opt/package/\n'})
    assert run_in_process(["lock", "rel"], workspace).returncode == 0
    out = tmp_path / "fs"
    proc = run_in_process(["image", "rel", "--output", str(out)], workspace)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "built nowhere" in proc.stdout + proc.stderr
    got = list((out / "opt/package").iterdir())
    assert [p.name for p in got] == [FILES[1]]
    assert hashlib.sha256(got[0].read_bytes()).hexdigest() == _sha(index, FILES[1])
    again = run_in_process(["image", "rel"], workspace)  # nothing changed: nothing is made again
    assert again.returncode == 0, again.stderr
    assert "built nowhere" not in again.stdout + again.stderr


def test_a_fresh_runner_taking_the_package_from_the_cache_applies_a_patch_without_the_release(
        workspace, index, tmp_path, registry, docker_engine, debian_reachable):
    """A patch applied as files to a package built around the release: a fresh runner that finds
    the package's unpatched outputs in the registry cache writes the layer of patched files from
    them, and makes nothing that only the package's build needs (the release's index is gone by
    then: a download would fail the build)."""
    write_image(workspace, "rel", BUSYBOX_BUILDER + f"""
components:
  kernels:
    release: {{name: kern, version: "1.0", index: "{index.url}"}}
  package:
    source: {{path: src}}
    needs: [kernels]
    patches: [package/0001-tune.patch]
    build: {{script: src/build.sh}}
    outputs: {{paths: [/opt/package]}}
install: [package]
""", {"src/build.sh": '#!/bin/sh\nset -e\nmkdir -p /opt/package\ncp "$ENGINEBUILD_DEP_KERNELS"/*.whl /opt/package/\n'
                      'cp tune.py /opt/package/\n',
      "src/tune.py": "LAYERS = 1\nNAME = 'pkg'\n"})
    (workspace / "images/rel/src/build.sh").chmod(0o755)

    def patch(value: int) -> None:
        write_patch(workspace, "package/0001-tune.patch", f"""
            Subject: tune
            Description: a setting of the package's Python
            Upstream: not forwarded (test)
            ---
            --- a/tune.py
            +++ b/tune.py
            @@ -1,2 +1,2 @@
            -LAYERS = 1
            +LAYERS = {value}
             NAME = 'pkg'
            """)

    patch(2)
    assert run_in_process(["lock", "rel"], workspace).returncode == 0
    cache = f"{registry.host}/enginebuild-test/relcache-{tmp_path.name[-8:]}"
    target = ["--push", "--to", f"{registry.host}/enginebuild-test/rel-{tmp_path.name[-8:]}"]
    first = run_in_process(["image", "rel", "--no-load", "--cache", cache, *target], workspace,
                    env={"ENGINEBUILD_HOME": str(tmp_path / "first")})
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    assert "built nowhere" in first.stdout + first.stderr and "applied as files" in run_in_process(
        ["plan", "rel"], workspace).stdout
    index.stop()  # the release is out of reach from here on
    patch(3)
    second = run_in_process(["image", "rel", "--no-load", "--cache", cache, *target], workspace,
                     env={"ENGINEBUILD_HOME": str(tmp_path / "second")})
    said = second.stdout + second.stderr
    assert second.returncode == 0, said[-3000:]
    assert "stood in by" in said and "component package: outputs pulled from" in said, said[-3000:]
    assert "component kernels" not in said, said[-3000:]
    assert "built nowhere" not in said and "downloading" not in said, said[-3000:]
    held = set()  # the package's files in the tars of this runner's store: its outputs, the new layer
    for blob in (tmp_path / "second").rglob("*"):
        if blob.is_file() and tarfile.is_tarfile(blob):
            with tarfile.open(blob) as tar:
                held |= {(m.name, tar.extractfile(m).read()) for m in tar if m.name == "opt/package/tune.py"}
    assert held == {("opt/package/tune.py", b"LAYERS = 1\nNAME = 'pkg'\n"),
                    ("opt/package/tune.py", b"LAYERS = 3\nNAME = 'pkg'\n")}, held
