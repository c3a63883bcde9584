"""Python closures at the scale of a real engine image: 150+ distributions grouped into few
layers (the engine refuses an image deeper than 125), a bump of one small distribution
rewriting one layer, and a distribution the base ships replaced by the spec's version with
nothing of the old one left. Real parts: wheels served by a local PEP 503 index and PyPI,
uv, Debian's python3, the Docker engine and a registry."""
from __future__ import annotations

import hashlib
import json
import random
import uuid

import pytest

from helpers.docker import assert_pip_check_clean, docker
from helpers.inprocess import run_in_process
from helpers.pyindex import Index, make_wheel
from helpers.specs import write_image

pytestmark = [pytest.mark.network]

COUNT = 160  # small distributions in the closure
PYTHON_RUNTIME = """base: {base}
platform: linux/amd64
{system}python:
  version: "3.11"
{indexes}  requirements:
{requirements}entrypoint: ["/usr/bin/python3"]
"""
DEBIAN_PYTHON = """system:
  install: extract
  packages: [busybox-static, python3]
  run: [["/bin/busybox", "--install", "-s", "/bin"], "mkdir -p /tmp && chmod 1777 /tmp"]
"""
PIP = "    - pip==25.3\n"  # so that `python3 -m pip check` can judge the result


def scale_spec(index_url: str, versions: dict[str, str]) -> str:
    reqs = "".join(f"    - {{requirement: \"{name}=={version}\", index: ours}}\n" for name, version in versions.items())
    return PYTHON_RUNTIME.format(base="scratch", system=DEBIAN_PYTHON, indexes=f"  indexes: {{ours: \"{index_url}\"}}\n",
                                 requirements=reqs + PIP)


def plan_doc(ws, name: str) -> dict:
    proc = run_in_process(["plan", name, "--json"], ws)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["images"][0]


@pytest.fixture
def closure(tmp_path):
    """A local index with COUNT small distributions (each needing the next) and one big one
    (33 MiB that do not compress)."""
    index = Index(tmp_path / "index")
    folder = tmp_path / "wheels"
    versions = {}
    for n in range(COUNT):
        name = f"eb-scale-{n:03d}"
        requires = (f"eb-scale-{n + 1:03d}",) if n + 1 < COUNT else ()
        index.add(name, make_wheel(folder, name, "1.0", requires=requires))
        versions[name] = "1.0"
    noise = random.Random(7).randbytes(33 * 2**20)
    big = make_wheel(folder, "eb-scale-big", "1.0", files={"eb_scale_big/__init__.py": "",
                                                          "eb_scale_big/blob.bin": noise})
    index.add("eb-scale-big", big)
    versions["eb-scale-big"] = "1.0"
    try:
        yield index, folder, versions
    finally:
        index.stop()


def test_a_closure_of_160_distributions_is_few_layers_loads_and_a_bump_rewrites_one_layer(
        workspace, closure, docker_engine, pypi_reachable, debian_reachable):
    index, folder, versions = closure
    write_image(workspace, "scale", scale_spec(index.url, versions))
    proc = run_in_process(["lock", "scale"], workspace)
    assert proc.returncode == 0, proc.stderr
    plan = plan_doc(workspace, "scale")
    python_layers = [row["name"] for row in plan["layers"] if row["name"].startswith("python ")]
    assert sum(name.count("eb-scale-") for name in python_layers) == COUNT + 1  # every one, once
    assert "python eb-scale-big 1.0" in python_layers  # big: a layer of its own
    assert len(python_layers) <= 17 and len(plan["layers"]) <= 100
    tag = "enginebuild/scale:latest"
    try:
        proc = run_in_process(["image", "scale"], workspace)
        assert proc.returncode == 0, proc.stderr
        layers = json.loads(docker("image", "inspect", tag, "--format", "{{json .RootFS.Layers}}").stdout)
        assert len(layers) <= 100
        code = ("import importlib, importlib.metadata as m\n"
                f"[importlib.import_module(f'eb_scale_{{n:03d}}') for n in range({COUNT})]\n"
                "import eb_scale_big\n"
                "print(len([d for d in m.distributions() if d.metadata['Name'].startswith('eb-scale-')]))")
        out = docker("run", "--rm", tag, "-c", code, check=False)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == str(COUNT + 1)
        assert_pip_check_clean(tag)

        # bump one small distribution: one layer to write, the group holding it
        index.add("eb-scale-042", make_wheel(folder / "bumped", "eb-scale-042", "1.1", requires=("eb-scale-043",)))
        write_image(workspace, "scale", scale_spec(index.url, {**versions, "eb-scale-042": "1.1"}))
        proc = run_in_process(["lock", "scale"], workspace)
        assert proc.returncode == 0, proc.stderr
        after = plan_doc(workspace, "scale")
        assert after["layers_to_build"] == []
        # the group holding it, its bytecode (made from the layers above it) and the manifest (which records
        # every input)
        python, other = after["layers_to_write"][:-2], after["layers_to_write"][-2:]
        assert len(python) == 1 and "eb-scale-042 1.1" in python[0], after["layers_to_write"]
        assert other == ["bytecode (Python 3.11, checked hashes)", "manifest"], other
        old_names = [row["name"] for row in plan["layers"]]
        assert [row["name"] for row in after["layers"] if row["name"] not in old_names] == python
    finally:
        docker("rmi", "-f", tag, check=False)


def test_a_distribution_the_base_ships_is_replaced_leaving_one_version(workspace, registry, docker_engine,
                                                                      pypi_reachable, debian_reachable):
    # the base: Debian's python3 with six 1.16.0 and tabulate 0.8.10 (one module, tabulate.py)
    write_image(workspace, "pybase", PYTHON_RUNTIME.format(
        base="scratch", system=DEBIAN_PYTHON, indexes="",
        requirements="    - six==1.16.0\n    - tabulate==0.8.10\n"))
    assert run_in_process(["lock", "pybase"], workspace).returncode == 0
    repo = f"{registry.host}/enginebuild-test/pybase-{uuid.uuid4().hex[:8]}"
    proc = run_in_process(["image", "pybase", "--push", "--to", repo, "--push-tag", "1"], workspace)
    assert proc.returncode == 0, proc.stderr
    # over it: six 1.17.0 and tabulate 0.9.0 (a package folder, tabulate/): asked, so they replace the base's
    write_image(workspace, "up", PYTHON_RUNTIME.format(
        base=f"{repo}:1", system="", indexes="", requirements="    - six==1.17.0\n    - tabulate==0.9.0\n" + PIP))
    proc = run_in_process(["lock", "up"], workspace)
    assert proc.returncode == 0, proc.stderr
    lock = json.loads((workspace / "lockfiles/up.lock").read_text())
    pins = {p["name"]: p for p in lock["inputs"]["runtime.python@linux/amd64"]["resolved"]["packages"]}
    assert (pins["six"]["version"], pins["six"]["replaces"]) == ("1.17.0", "1.16.0")
    assert (pins["tabulate"]["version"], pins["tabulate"]["replaces"]) == ("0.9.0", "0.8.10")
    tag = "enginebuild/up:latest"
    try:
        proc = run_in_process(["image", "up"], workspace)
        assert proc.returncode == 0, proc.stderr
        code = ("import importlib.metadata as m, os, six, tabulate, sysconfig\n"
                "site = os.path.dirname(six.__file__)\n"
                "print(sorted(d.metadata['Name'] + ' ' + d.version for d in m.distributions()"
                " if d.metadata['Name'] in ('six', 'tabulate')))\n"
                "print(sorted(n for n in os.listdir(site) if n.startswith(('six', 'tabulate'))))\n"
                "print(six.__version__, tabulate.__version__)")
        out = docker("run", "--rm", tag, "-c", code, check=False)
        assert out.returncode == 0, out.stderr
        dists, files, versions = out.stdout.strip().splitlines()
        assert dists == "['six 1.17.0', 'tabulate 0.9.0']"
        assert files == "['six-1.17.0.dist-info', 'six.py', 'tabulate', 'tabulate-0.9.0.dist-info']"  # no tabulate.py
        assert versions == "1.17.0 0.9.0"
        assert_pip_check_clean(tag)
    finally:
        docker("rmi", "-f", tag, check=False)


WHEELER = """base: scratch
platform: linux/amd64
{system}python:
  version: "3.11"
  requirements:
    - {{requirement: ebwheel, component: wheeler{requires_from}}}
    - pip==25.3
builder:
  base: scratch
  system:
    install: extract
    packages: [busybox-static, python3]
    run: [["/bin/busybox", "--install", "-s", "/bin"]]
components:
  wheeler:
    source: {{path: wheeler}}
    build: {{script: wheeler/build.sh}}
    outputs: {{wheels: /out}}
entrypoint: ["/usr/bin/python3"]
"""
# the component's build writes a wheel whose Requires-Dist is its pyproject.toml's dependencies
MAKE_WHEEL = '''import base64, hashlib, sys, tomllib, zipfile
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
files = {"ebwheel/__init__.py": b"import six, tabulate\\n",
         "ebwheel-1.0.dist-info/METADATA": ("Metadata-Version: 2.1\\nName: ebwheel\\nVersion: 1.0\\n"
                                            + "".join(f"Requires-Dist: {d}\\n" for d in deps)).encode(),
         "ebwheel-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
rows = [f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}"
        for n, d in files.items()]
files["ebwheel-1.0.dist-info/RECORD"] = ("\\n".join(rows) + "\\nebwheel-1.0.dist-info/RECORD,,\\n").encode()
with zipfile.ZipFile(sys.argv[1] + "/ebwheel-1.0-py3-none-any.whl", "w") as z:
    for n, d in files.items():
        z.writestr(zipfile.ZipInfo(n, (2020, 1, 1, 0, 0, 0)), d)
'''


def test_a_component_wheel_brings_its_dependencies_and_metadata_the_lock_lacks_fails(
        workspace, docker_engine, pypi_reachable, debian_reachable):
    files = {"wheeler/pyproject.toml": '[project]\nname = "ebwheel"\nversion = "1.0"\n'
                                       'dependencies = ["six>=1.16", "tabulate==0.9.0; python_version >= \\"3.8\\""]\n',
             "wheeler/requirements.txt": "# what the build reads\nsix>=1.16\n",
             "wheeler/make_wheel.py": MAKE_WHEEL,
             "wheeler/build.sh": "#!/bin/sh\nset -e\nmkdir -p \"$ENGINEBUILD_OUTPUTS\"\n"
                                 "python3 make_wheel.py \"$ENGINEBUILD_OUTPUTS\"\n"}
    write_image(workspace, "wheels", WHEELER.format(system=DEBIAN_PYTHON, requires_from=""), files)
    proc = run_in_process(["lock", "wheels"], workspace)
    assert proc.returncode == 0, proc.stderr
    lock = json.loads((workspace / "lockfiles/wheels.lock").read_text())
    python = lock["inputs"]["runtime.python@linux/amd64"]["resolved"]
    pins = {p["name"]: p for p in python["packages"]}
    assert pins["tabulate"]["version"] == "0.9.0" and len(pins["six"]["sha256"]) == 64  # read from pyproject.toml
    assert pins["ebwheel"]["origin"] == "component" and [c for c, _ in python["wheel_sources"]] == ["wheeler"]
    tag = "enginebuild/wheels:latest"
    try:
        proc = run_in_process(["image", "wheels"], workspace)
        assert proc.returncode == 0, proc.stderr
        out = docker("run", "--rm", tag, "-c", "import ebwheel, tabulate; print(tabulate.__version__)", check=False)
        assert out.returncode == 0 and out.stdout.strip() == "0.9.0", out.stderr
        assert_pip_check_clean(tag)
        # told to read requirements.txt, which forgets tabulate: the wheel's metadata says otherwise
        write_image(workspace, "wheels", WHEELER.format(system=DEBIAN_PYTHON,
                                                        requires_from=", requires-from: [requirements.txt]"), files)
        assert run_in_process(["lock", "wheels"], workspace).returncode == 0
        proc = run_in_process(["image", "wheels"], workspace)
        assert proc.returncode == 1
        assert "ebwheel-1.0-py3-none-any.whl (built by component wheeler) needs what the lock did not resolve: " \
               "tabulate==0.9.0; python_version >= \"3.8\" (the lock has no tabulate)" in proc.stderr, proc.stderr
        assert "requires-from" in proc.stderr
    finally:
        docker("rmi", "-f", tag, check=False)


def _layer_members(tag: str, suffix: str) -> int:
    """How many layers of the saved image hold a file whose path ends with `suffix`."""
    import io
    import subprocess
    import tarfile

    saved = subprocess.run(["docker", "save", tag], capture_output=True, check=True).stdout
    count = 0
    with tarfile.open(fileobj=io.BytesIO(saved)) as image:
        for member in image:
            if not member.isfile() or not (member.name.endswith("layer.tar") or "blobs/" in member.name):
                continue
            data = image.extractfile(member).read()
            try:
                with tarfile.open(fileobj=io.BytesIO(data)) as layer:
                    count += sum(1 for m in layer if m.isfile() and m.name.endswith(suffix))
            except tarfile.TarError:
                continue  # a config or manifest blob
    return count


@pytest.mark.parametrize("ranges", [True, False], ids=["range-requests", "server-ignoring-range"])
def test_distributions_installing_the_same_files_share_a_layer_that_holds_them_once(
        workspace, tmp_path, ranges, pypi_reachable, debian_reachable, docker_engine):
    index = Index(tmp_path / "index", ranges=ranges)
    folder = tmp_path / "wheels"
    blob_a, blob_b = random.Random(1).randbytes(2 * 2**20), random.Random(2).randbytes(2 * 2**20)
    # a and b install the same 2 MiB path (other bytes in each); c installs only an empty
    # __init__.py alike; d and e each a small module of the same path and their own bytes
    index.add("eb-share-a", make_wheel(folder, "eb-share-a", "1.0", files={
        "eb_shared/__init__.py": "", "eb_shared/blob.bin": blob_a, "eb_share_a.py": ""}))
    index.add("eb-share-b", make_wheel(folder, "eb-share-b", "1.0", files={
        "eb_shared/blob.bin": blob_b, "eb_share_b.py": ""}))
    index.add("eb-share-c", make_wheel(folder, "eb-share-c", "1.0", files={
        "eb_shared/__init__.py": "", "eb_share_c.py": ""}))
    index.add("eb-share-d", make_wheel(folder, "eb-share-d", "1.0", files={"eb_backend.py": "WHO = 'd'\n"}))
    index.add("eb-share-e", make_wheel(folder, "eb-share-e", "1.0", files={"eb_backend.py": "WHO = 'e'\n"}))
    try:
        write_image(workspace, "share", scale_spec(index.url, {f"eb-share-{x}": "1.0" for x in "abcde"}))
        proc = run_in_process(["lock", "share"], workspace)
        assert proc.returncode == 0, proc.stderr
        assert (index.ranged > 0) is ranges  # the file lists were read by range when the server allows it
        lock = json.loads((workspace / "lockfiles/share.lock").read_text())
        pins = {p["name"]: p for p in lock["inputs"]["runtime.python@linux/amd64"]["resolved"]["packages"]}
        assert pins["eb-share-a"]["shares"] == ["eb-share-b"] and pins["eb-share-b"]["shares"] == ["eb-share-a"]
        assert pins["eb-share-d"]["shares"] == ["eb-share-e"]  # 11 bytes, but not the same ones
        assert "shares" not in pins["eb-share-c"]
        if not ranges:
            return  # the rest does not depend on how the lists were read
        python_layers = [row["name"] for row in plan_doc(workspace, "share")["layers"]
                         if row["name"].startswith("python ")]
        for first, second in (("eb-share-a", "eb-share-b"), ("eb-share-d", "eb-share-e")):
            together = [name for name in python_layers if f"{first} 1.0" in name]
            assert len(together) == 1 and f"{second} 1.0" in together[0]
        tag = "enginebuild/share:latest"
        try:
            proc = run_in_process(["image", "share"], workspace)
            assert proc.returncode == 0, proc.stderr
            assert _layer_members(tag, "eb_shared/blob.bin") == 1  # once in the image, not once per distribution
            code = ("import eb_shared, eb_backend, hashlib, os\n"
                    "print(hashlib.sha256(open(os.path.join(os.path.dirname(eb_shared.__file__), 'blob.bin'),"
                    " 'rb').read()).hexdigest(), eb_backend.WHO)")
            out = docker("run", "--rm", tag, "-c", code, check=False)
            assert out.returncode == 0, out.stderr
            # what `pip install --no-deps -r` of the closure leaves: it installs in descending
            # name order, so the first by name is written last
            assert out.stdout.split() == [hashlib.sha256(blob_a).hexdigest(), "d"]
            check = docker("run", "--rm", tag, "-m", "pip", "check", check=False)
            assert check.returncode == 0, check.stdout + check.stderr
        finally:
            docker("rmi", "-f", tag, check=False)
    finally:
        index.stop()


def test_a_clash_between_two_components_requirement_files_names_both_files(workspace, pypi_reachable,
                                                                           debian_reachable):
    """What each component's wheel needs is read from its source's requirements file; when the two
    files ask for versions nothing satisfies together, the message names each file and the
    component whose source holds it (not only the spec's lines)."""
    spec = WHEELER.format(system=DEBIAN_PYTHON, requires_from=", requires-from: [requirements.txt]")
    spec = spec.replace("    - pip==25.3\n", "    - {requirement: ebwheel2, component: wheeler2, "
                                                "requires-from: [requirements.txt]}\n")
    spec = spec.replace("entrypoint:", "  wheeler2:\n    source: {path: wheeler2}\n    build: {script: wheeler2/build.sh}\n"
                                       "    outputs: {wheels: /out}\nentrypoint:")
    files = {"wheeler/requirements.txt": "six==1.16.0\n", "wheeler/build.sh": "#!/bin/sh\n",
             "wheeler2/requirements.txt": "six==1.17.0\n", "wheeler2/build.sh": "#!/bin/sh\n"}
    write_image(workspace, "clash", spec, files)
    proc = run_in_process(["lock", "clash"], workspace)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the Python requirements cannot be satisfied together" in proc.stderr, proc.stderr
    involved = proc.stderr[proc.stderr.index("involved:"):]
    assert "requirements.txt of component wheeler's source" in involved, involved
    assert "requirements.txt of component wheeler2's source" in involved, involved
    assert "Traceback" not in proc.stderr


def test_a_requirements_file_is_followed_with_named_exclusions(workspace, docker_engine, pypi_reachable,
                                                               debian_reachable):
    """What a recipe did with `sed '/flashinfer/d' requirements/cuda.txt` before building: the
    source's file is read as it is at the pinned source (so it keeps following upstream), less the
    names `exclude` lists; the wheel's own metadata is not asked to find them in what the lock
    resolved for it, but the image must still meet them: excluded and provided by nothing, the
    build is refused naming the need; pinned on its own, it is met."""
    files = {"wheeler/pyproject.toml": '[project]\nname = "ebwheel"\nversion = "1.0"\n'
                                       'dependencies = ["six>=1.16", "tabulate==0.9.0"]\n',
             "wheeler/requirements.txt": "six>=1.16\ntabulate==0.9.0\n",
             "wheeler/make_wheel.py": MAKE_WHEEL,
             "wheeler/build.sh": "#!/bin/sh\nset -e\nmkdir -p \"$ENGINEBUILD_OUTPUTS\"\n"
                                 "python3 make_wheel.py \"$ENGINEBUILD_OUTPUTS\"\n"}
    typo = WHEELER.format(system=DEBIAN_PYTHON, requires_from=", requires-from: [requirements.txt], exclude: [Tabulat]")
    write_image(workspace, "excl", typo, files)
    proc = run_in_process(["lock", "excl"], workspace)  # a typo excludes nothing: said, with what was meant
    assert proc.returncode != 0 and "exclude: 'tabulat' is not a need the files of component wheeler" in \
        proc.stdout + proc.stderr and "did you mean 'tabulate'?" in proc.stdout + proc.stderr, proc.stderr
    (workspace / "lockfiles/excl.lock").unlink(missing_ok=True)
    spec = WHEELER.format(system=DEBIAN_PYTHON, requires_from=", requires-from: [requirements.txt], exclude: [Tabulate]")
    write_image(workspace, "excl", spec, files)
    proc = run_in_process(["lock", "excl"], workspace)
    assert proc.returncode == 0, proc.stderr
    python = json.loads((workspace / "lockfiles/excl.lock").read_text())["inputs"]["runtime.python@linux/amd64"]
    names = {p["name"] for p in python["resolved"]["packages"]}
    assert "six" in names and "tabulate" not in names, names
    assert python["request"]["requirements"][0]["exclude"] == ["tabulate"]
    tag = "enginebuild/excl:latest"
    unmet = run_in_process(["image", "excl"], workspace)
    assert unmet.returncode == 1, unmet.stdout[-2000:] + unmet.stderr[-2000:]
    assert "tabulate==0.9.0 (excluded from the lock, and nothing in the image provides tabulate" in unmet.stderr
    write_image(workspace, "excl", spec.replace("    - pip==25.3\n", "    - pip==25.3\n    - tabulate==0.9.0\n"), files)
    assert run_in_process(["lock", "excl"], workspace).returncode == 0
    try:
        built = run_in_process(["image", "excl"], workspace)
        assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
        out = docker("run", "--rm", tag, "-c", "import six; print(six.__version__)", check=False)
        assert out.returncode == 0 and out.stdout.strip(), out.stderr
    finally:
        docker("rmi", "-f", tag, check=False)
    write_image(workspace, "bad", WHEELER.format(system=DEBIAN_PYTHON, requires_from="").replace(
        "    - pip==25.3\n", "    - {requirement: pip, exclude: [six]}\n"), files)
    refused = run_in_process(["lock", "bad"], workspace)
    assert refused.returncode == 2 and "exclude" in refused.stderr and "goes with `component`" in refused.stderr
