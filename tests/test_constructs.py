"""Each construct real Spark recipes need, once with a spec that uses it and once with a spec
that gets it wrong (refused with a clear error at file:line, exit 2, nothing written):

 1. files: folders and globs, with modes      6. several apt archives, keyrings by fingerprint
 2. variants and one-off --build-arg           7. healthcheck, shell, user, workdir, stopsignal
 3. Python from several named indexes          8. git sources: submodules, metadata, a version
 4. steps in components and the runtime        9. URL inputs pinned by sha256
 5. env extending variables                   10. build scripts run by their #! line; names with "."
11. --build-arg names checked; build args enginebuild sets protected; any quantization name
12. only the components the runtime installs or needs are built
13. image --output: the runtime's filesystem or a component's outputs to a folder
14. named environments shared by components (and the runtime's own)
15. label-only images                         16. init: true
17. editable installs: the tree kept where the image has it, with its editable wheel
"""
from __future__ import annotations

import gzip
import hashlib
import json
import re
import subprocess
import time
import uuid
from pathlib import Path
from textwrap import dedent, indent

import pytest

from helpers.docker import assert_pip_check_clean, docker, read_file
from helpers.inprocess import run_in_process
from helpers.specs import BUSYBOX_BUILDER, write_image
from helpers.www import Server
from test_python_scale import DEBIAN_PYTHON

SCRATCH = "base: scratch\nplatform: linux/amd64\n"


@pytest.fixture
def ws(tmp_path) -> Path:
    root = tmp_path / "repo"
    (root / "images").mkdir(parents=True)
    (root / "lockfiles").mkdir()
    return root


def refused(ws: Path, args: list[str], where: str, message: str) -> str:
    """The command exits 2 with `error: images/t/image.yaml:LINE: KEY: message` and writes no lock;
    `where` is the line number, or a text whose first line in the spec is meant."""
    if not where.isdigit():
        lines = (ws / "images/t/image.yaml").read_text().splitlines()
        where = str(next(i for i, line in enumerate(lines, 1) if where in line))
    before = sorted(p.name for p in (ws / "lockfiles").iterdir())
    proc = run_in_process(args, ws)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert re.match(rf"error: images/t/image\.yaml:{where}: .*{message}", proc.stderr), proc.stderr
    assert sorted(p.name for p in (ws / "lockfiles").iterdir()) == before
    return proc.stderr


def rendered(ws: Path, *args: str) -> str:
    proc = run_in_process(["render", *args], ws)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def www(tmp_path):
    folder = tmp_path / "www"
    folder.mkdir()
    server = Server(folder)
    yield folder, server.url
    server.close()


# -- 1. files: folders, globs, modes ---------------------------------------------------------------

def test_files_take_folders_and_globs_with_modes_one_layer_per_entry(ws, tmp_path, docker_engine):
    write_image(ws, "t", SCRATCH + dedent("""
        files:
          /etc/engine/: conf/
          /opt/bin/: "scripts/*.sh"
          /opt/secret.conf: {src: conf/a.json, mode: "0600"}
        """), {"conf/a.json": "{}\n", "conf/sub/b.json": "[]\n", "scripts/a.sh": "#!/bin/sh\n",
              "scripts/b.sh": "#!/bin/sh\n", "scripts/notes.txt": "not a script\n"})
    assert run_in_process(["lock", "t"], ws).returncode == 0
    plan = json.loads(run_in_process(["plan", "t", "--json"], ws).stdout)["images"][0]
    assert [layer["name"] for layer in plan["layers"] if layer["kind"] == "files"] == [
        "files /etc/engine/", "files /opt/bin/", "files /opt/secret.conf"]
    out = tmp_path / "out"
    assert run_in_process(["render", "t", "--out", out], ws).returncode == 0
    files = out / "linux-amd64/runtime-tail/files"
    found = {str(p.relative_to(files).as_posix()).split("/", 1)[1]: oct(p.stat().st_mode & 0o7777)
             for p in files.rglob("*") if p.is_file()}
    assert found == {"etc/engine/a.json": "0o644", "etc/engine/sub/b.json": "0o644", "opt/bin/a.sh": "0o755",
                     "opt/bin/b.sh": "0o755", "opt/secret.conf": "0o600"}


def test_a_glob_into_a_single_file_destination_is_refused(ws):
    write_image(ws, "t", SCRATCH + 'files:\n  /opt/bin/run.sh: "scripts/*.sh"\n', {"scripts/a.sh": "#!/bin/sh\n"})
    refused(ws, ["lock", "t"], "4", "files./opt/bin/run.sh")


# -- 2. variants, and a pin or argument overridden for one build -----------------------------------

COMPONENT = BUSYBOX_BUILDER + """components:
  e:
    source: {path: src}
    build: {script: build.sh, args: {OPT: "-O2"}}
    outputs: {paths: [/x]}
install: [e]
"""
COMPONENT_FILES = {"src/a.c": "int a;\n", "build.sh": "#!/bin/sh\necho built > /x\n"}


def test_variants_lock_separately_and_a_build_arg_override_never_reaches_the_lock(ws, debian_reachable):
    write_image(ws, "t", COMPONENT + """variants:
  fast: {components: {e: {build: {args: {OPT: "-O3"}}}}}
  debug: {env: {DEBUG: "1"}}
""", COMPONENT_FILES)
    listed = run_in_process(["list"], ws).stdout
    assert re.search(r"^t:fast ", listed, re.M) and re.search(r"^t:debug ", listed, re.M)
    for name in ("t", "t:fast", "t:debug"):
        assert run_in_process(["lock", name], ws).returncode == 0
    assert sorted(p.name for p in (ws / "lockfiles").iterdir()) == ["t--debug.lock", "t--fast.lock", "t.lock"]
    assert 'OPT="-O3"' in rendered(ws, "t:fast") and 'OPT="-O2"' in rendered(ws, "t")
    assert 'DEBUG="1"' in rendered(ws, "t:debug") and "DEBUG" not in rendered(ws, "t")
    locks = {p.name: p.read_bytes() for p in (ws / "lockfiles").iterdir()}
    assert 'OPT="-Os"' in rendered(ws, "t", "--build-arg", "OPT=-Os")
    assert run_in_process(["lock", "--check", "t"], ws).returncode == 0
    assert {p.name: p.read_bytes() for p in (ws / "lockfiles").iterdir()} == locks


def test_an_unknown_variant_or_a_bad_key_in_a_variant_is_refused(ws):
    write_image(ws, "t", COMPONENT + "variants:\n  fast: {envv: {A: b}}\n", COMPONENT_FILES)
    refused(ws, ["lock", "t:fast"], "envv", "variants.fast.envv: unknown key")
    write_image(ws, "t", COMPONENT + "variants:\n  fast: {env: {A: b}}\n", COMPONENT_FILES)
    proc = run_in_process(["lock", "t:slow"], ws)
    assert proc.returncode == 2 and "has no variant 'slow' (it has: fast)" in proc.stderr, proc.stderr


# -- 3. Python from several named indexes -----------------------------------------------------------

def test_each_requirement_can_name_its_own_index(ws):
    write_image(ws, "t", """
        base: example.invalid/python:3.12
        platform: linux/arm64
        python:
          version: "3.12"
          indexes: {pytorch: "https://download.pytorch.org/whl/cu130", flashinfer: "https://flashinfer.ai/whl"}
          requirements:
            - {requirement: torch==2.13.0, index: pytorch}
            - {requirement: flashinfer-python==0.6.18, index: flashinfer, deps: false}
            - tabulate==0.9.0
        """)
    line = next(line for line in rendered(ws, "t", "--unpinned").splitlines() if "runtime.python" in line)
    assert line.endswith("Python 3.12: torch==2.13.0 (index pytorch); flashinfer-python==0.6.18 (index flashinfer, "
                         "no deps); tabulate==0.9.0")


def test_a_requirement_naming_an_undeclared_index_is_refused(ws):
    write_image(ws, "t", """
        base: example.invalid/python:3.12
        python:
          version: "3.12"
          indexes: {pytorch: "https://download.pytorch.org/whl/cu130"}
          requirements:
            - {requirement: torch==2.13.0, index: pytroch}
        """)
    refused(ws, ["render", "t", "--unpinned"], "6", "pytroch")


# -- 4. steps: ordered, keyed commands; a failure fails the build with the step's output -----------

def test_steps_run_in_order_in_components_and_at_the_end_of_the_runtime(ws):
    write_image(ws, "t", COMPONENT.replace("    outputs:", "    steps: [{name: check, run: test -s /x}]\n    outputs:")
                + 'shell: ["/bin/sh", "-e", "-c"]\nsteps:\n  - {name: first, run: "echo 1 > /one"}\n'
                  "  - {name: cleanup, run: [/bin/rm, -f, /one]}\n", COMPONENT_FILES)
    text = rendered(ws, "t", "--unpinned")
    component = text.split("### component e")[1].split("###")[0]
    assert component.rstrip().endswith("RUN test -s /x")
    runtime = text.split("### runtime image")[1]
    assert re.findall(r"^RUN (.*?)   # BuildKit", runtime, re.M) == [
        '["/bin/sh", "-e", "-c", "echo 1 > /one"]', '["/bin/rm", "-f", "/one"]']


def test_a_step_naming_a_path_files_writes_later_is_named_by_plan(ws):
    """Steps run below the `files` layers: a step reading a file that `files:` copies sees what
    was there before it (nothing), which plan and render say, naming both lines."""
    write_image(ws, "t", SCRATCH + "files:\n  /opt/app/config.json: config.json\n"
                "steps:\n  - {name: read-config, run: \"cat /opt/app/config.json > /opt/app/seen\"}\n"
                "  - {name: unrelated, run: \"cat /opt/app/config.json.bak || true\"}\n",
                {"config.json": "{}\n"})
    proc = run_in_process(["plan", "t", "--unpinned"], ws)
    warned = [line for line in proc.stderr.splitlines() if "warning: step" in line]
    assert len(warned) == 1, proc.stderr
    assert "step read-config names /opt/app/config.json, which files:" in warned[0]
    assert warned[0].startswith("images/t/image.yaml:") and "does not see it" in warned[0]


def test_a_step_without_a_command_is_refused(ws):
    write_image(ws, "t", SCRATCH + "steps:\n  - {name: check}\n")
    refused(ws, ["render", "t", "--unpinned"], "4", "steps\\[0\\].run")


def test_a_failing_step_fails_the_build_with_its_output(ws, docker_engine, debian_reachable):
    write_image(ws, "step-fails", """
        base: scratch
        platform: linux/amd64
        system:
          install: extract
          packages: [busybox-static]
          run: [["/bin/busybox", "--install", "-s", "/bin"]]
        steps:
          - {name: model-check, run: "echo the weights are missing >&2; exit 3"}
        """)
    assert run_in_process(["lock", "step-fails"], ws).returncode == 0
    proc = run_in_process(["image", "step-fails"], ws)
    assert proc.returncode == 1
    assert "step model-check" in proc.stderr and "the weights are missing" in proc.stderr, proc.stderr
    assert docker_engine.image_id("enginebuild/step-fails:latest") is None


def test_a_script_of_several_lines_stops_at_its_first_failing_command_naming_the_line(ws, docker_engine,
                                                                                      debian_reachable):
    """As GitHub Actions runs `run: |`: a `false` in the middle fails the step (it built with exit 0)."""
    write_image(ws, "script-fails", BUSYBOX_RUNTIME + dedent("""\
        steps:
          - name: setup
            run: |
              echo first line ran
              false
              echo never printed > /never
        """))
    assert run_in_process(["lock", "script-fails"], ws).returncode == 0
    proc = run_in_process(["image", "script-fails"], ws)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "step setup" in proc.stderr and "first line ran" in proc.stderr
    lines = (ws / "images/script-fails/image.yaml").read_text().splitlines()
    at = next(i for i, line in enumerate(lines, 1) if "- name: setup" in line)
    assert f"step setup (images/script-fails/image.yaml:{at}) failed" in proc.stderr, proc.stderr  # the spec's line
    assert "enginebuild: the script stopped at its line 2 (exit 1)" in proc.stderr, proc.stderr
    assert "never printed" not in proc.stderr
    assert docker_engine.image_id("enginebuild/script-fails:latest") is None


REWRITE = """
    base: scratch
    platform: linux/amd64
    system:
      install: extract
      packages: [busybox-static]
      run:
        - ["/bin/busybox", "--install", "-s", "/bin"]
        - "mkdir -p /opt/engine && echo 'aux_layers = range(1, 62, 15)' > /opt/engine/model_runner.py"
    steps:
      - name: rewrite
        files: [rewrite.sh]
        run: |
          sh /opt/enginebuild/step/rewrite.sh /opt/engine/model_runner.py
          if ! grep -q 'range(2, 63, 15)' /opt/engine/model_runner.py; then
            echo "the rewrite did not take" >&2
            exit 4
          fi
    """


def test_a_step_runs_a_recipe_file_and_a_script_of_several_lines_and_what_it_changes_lands(ws, docker_engine,
                                                                                            debian_reachable):
    rewrite = "#!/bin/sh\nsed -i 's/range(1, 62, 15)/range(2, 63, 15)/' \"$1\"\n"
    write_image(ws, "rewrite", REWRITE, {"rewrite.sh": rewrite})
    assert run_in_process(["lock", "rewrite"], ws).returncode == 0
    proc = run_in_process(["image", "rewrite"], ws)
    assert proc.returncode == 0, proc.stderr
    assert read_file("enginebuild/rewrite:latest", "/opt/engine/model_runner.py") == b"aux_layers = range(2, 63, 15)\n"
    # the step's file was mounted, never copied: no mount point of it is left behind either (what
    # /opt/enginebuild holds is the image's manifest alone)
    assert docker("run", "--rm", "enginebuild/rewrite:latest", "find", "/opt/enginebuild").stdout.split() == \
        ["/opt/enginebuild", "/opt/enginebuild/manifest.json"]
    # the step's file is one of its inputs: edited, the step runs again, and its check fails the build
    (ws / "images/rewrite/rewrite.sh").write_text(rewrite.replace("range(2, 63, 15)", "range(3, 64, 15)"))
    plan = json.loads(run_in_process(["plan", "rewrite", "--json"], ws).stdout)["images"][0]
    step = next(row for row in plan["layers"] if row["name"] == "step rewrite")
    assert step["action"] == "build" and "images/rewrite/rewrite.sh" in " ".join(step["changed"]), step
    proc = run_in_process(["image", "rewrite"], ws)
    assert proc.returncode == 1 and "the rewrite did not take" in proc.stderr, proc.stderr


def test_a_step_naming_a_file_that_is_not_there_is_refused(ws):
    write_image(ws, "t", SCRATCH + "steps:\n  - {name: s, files: [gone.py], run: python3 /opt/enginebuild/step/gone.py}\n")
    refused(ws, ["render", "t", "--unpinned"], "4", "steps\\[0\\].files\\[0\\]: file not found")


# -- 5. env extending variables ---------------------------------------------------------------------

def test_env_extends_earlier_and_defaulted_variables_into_literal_values(ws):
    write_image(ws, "t", SCRATCH + 'env:\n  ROOT: /opt\n  PATH: "$ROOT/bin:${PATH:-/usr/bin}"\n'
                                   '  PYTHONPATH: "${ROOT}/lib:${PYTHONPATH:-}"\n  PRICE: "$$5"\n')
    assert run_in_process(["lock", "t"], ws).returncode == 0
    env = next(line for line in rendered(ws, "t").splitlines() if line.startswith("ENV "))
    assert env == 'ENV ROOT="/opt" PATH="/opt/bin:/usr/bin" PYTHONPATH="/opt/lib:" PRICE="\\$5"'


def test_env_naming_a_variable_nothing_defines_is_refused(ws):
    write_image(ws, "t", SCRATCH + 'env:\n  LD_LIBRARY_PATH: "/usr/local/lib:$LD_LIBRARY_PATH"\n')
    assert run_in_process(["lock", "t"], ws).returncode == 0
    error = refused(ws, ["render", "t"], "4", "env.LD_LIBRARY_PATH: refers to \\$LD_LIBRARY_PATH")
    assert "Docker would put the empty string there" in error and "${LD_LIBRARY_PATH:-} for Docker's" in error


def test_an_env_edit_runs_no_command_and_build_env_is_what_commands_see(ws, docker_engine, debian_reachable):
    """`env` is the image's, set after its commands (a launcher's PORT is no input of an apt-style
    command); `build-env` is what the commands see, ENV before RUN. Both end in the config."""
    spec = BUSYBOX_RUNTIME + dedent("""\
        build-env: {TOOL_HOME: /opt/tool}
        env: {PORT: "8000", TOOL_BIN: "$TOOL_HOME/bin"}
        steps:
          - name: record
            run: mkdir -p /opt/seen && echo "tool=$TOOL_HOME port=${PORT:-unset}" > /opt/seen/env
        """)
    write_image(ws, "t", spec)
    assert run_in_process(["lock", "t"], ws).returncode == 0
    first = run_in_process(["image", "t"], ws)
    assert first.returncode == 0, first.stderr
    assert read_file("enginebuild/t:latest", "/opt/seen/env") == b"tool=/opt/tool port=unset\n"
    write_image(ws, "t", spec.replace('PORT: "8000"', 'PORT: "8001"'))
    second = run_in_process(["image", "t"], ws)
    assert second.returncode == 0, second.stderr
    assert "command layer" not in second.stdout, second.stdout  # nothing ran: the config alone changed
    env = dict(e.split("=", 1) for e in json.loads(docker("image", "inspect", "enginebuild/t:latest").stdout)[0]
               ["Config"]["Env"])
    assert (env["PORT"], env["TOOL_HOME"], env["TOOL_BIN"]) == ("8001", "/opt/tool", "/opt/tool/bin")
    write_image(ws, "t", spec.replace("/opt/tool}", "/opt/tool2}"))
    third = run_in_process(["image", "t"], ws)
    assert third.returncode == 0 and "ran 2 command layer(s)" in third.stdout, third.stdout  # build-env: their input
    assert read_file("enginebuild/t:latest", "/opt/seen/env") == b"tool=/opt/tool2 port=unset\n"


# -- 6. several apt archives, a flat one with its own key --------------------------------------------

def gpg(home: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback",
                           "--passphrase", "", *args], input=stdin, capture_output=True, check=True).stdout


def new_key(home: Path, who: str) -> str:
    home.mkdir(mode=0o700)
    gpg(home, "--quick-gen-key", f"{who} <{who}@example.invalid>", "ed25519", "sign", "never")
    listing = gpg(home, "--with-colons", "--list-keys").decode()
    return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))


@pytest.fixture
def flat_archive(www, tmp_path):
    """A flat repository (NVIDIA's CUDA layout) signed by its own key, served over HTTP."""
    folder, url = www
    home = tmp_path / "archive-key"
    fingerprint = new_key(home, "archive")
    (folder / "sbsa").mkdir()
    deb, older = b"a package file", b"an older package file"
    packages = gzip.compress((  # two versions of one package, as NVIDIA's CUDA repository lists them
        "Package: cuda-demo-dev-13-0\nVersion: 13.0.88-1\nArchitecture: amd64\n"
        f"Filename: ./cuda-demo-dev-13-0_13.0.88-1_amd64.deb\nSize: {len(deb)}\n"
        f"SHA256: {hashlib.sha256(deb).hexdigest()}\n\n"
        "Package: cuda-demo-dev-13-0\nVersion: 13.0.48-1\nArchitecture: amd64\n"
        f"Filename: ./cuda-demo-dev-13-0_13.0.48-1_amd64.deb\nSize: {len(older)}\n"
        f"SHA256: {hashlib.sha256(older).hexdigest()}\n\n").encode(), mtime=0)
    (folder / "sbsa/Packages.gz").write_bytes(packages)
    release = f"Origin: test\nLabel: test\nSHA256:\n {hashlib.sha256(packages).hexdigest()} {len(packages)} Packages.gz\n"
    (folder / "sbsa/InRelease").write_bytes(gpg(home, "--clearsign", stdin=release.encode()))
    (folder / "sbsa/archive.pub").write_bytes(gpg(home, "--armor", "--export", fingerprint))
    return url, fingerprint, hashlib.sha256(deb).hexdigest()


FLAT = """
base: scratch
platform: linux/amd64
system:
  install: extract
  archives:
    - url: "{url}"
      suite: sbsa
      flat: true
      keyring: {{url: "{url}/sbsa/archive.pub"}}
      fingerprint: "{fingerprint}"
  packages: [cuda-demo-dev-13-0]
"""


def test_a_flat_archive_with_its_own_armoured_key_resolves_into_the_lock(ws, flat_archive):
    url, fingerprint, sha = flat_archive
    write_image(ws, "t", FLAT.format(url=url, fingerprint=fingerprint))
    proc = run_in_process(["lock", "t"], ws)
    assert proc.returncode == 0, proc.stderr
    resolved = json.loads((ws / "lockfiles/t.lock").read_text())["inputs"]["runtime.system@linux/amd64"]["resolved"]
    assert resolved["archives"] == [f"{url}/sbsa"] and resolved["signature_verified"] == [True]
    assert [(p["name"], p["version"], p["sha256"]) for p in resolved["packages"]] == [
        ("cuda-demo-dev-13-0", "13.0.88-1", sha)]


def test_a_system_package_pinned_to_a_version_resolves_to_it_and_an_absent_version_is_refused(ws, flat_archive):
    url, fingerprint, _ = flat_archive
    write_image(ws, "t", FLAT.format(url=url, fingerprint=fingerprint).replace(
        "packages: [cuda-demo-dev-13-0]", "packages: [cuda-demo-dev-13-0=13.0.48-1]"))
    proc = run_in_process(["lock", "t"], ws)
    assert proc.returncode == 0, proc.stderr
    entry = json.loads((ws / "lockfiles/t.lock").read_text())["inputs"]["runtime.system@linux/amd64"]
    assert entry["request"]["packages"] == ["cuda-demo-dev-13-0=13.0.48-1"]
    assert [(p["name"], p["version"]) for p in entry["resolved"]["packages"]] == [("cuda-demo-dev-13-0", "13.0.48-1")]
    assert "cuda-demo-dev-13-0_13.0.48-1_amd64.deb" in entry["resolved"]["packages"][0]["filename"]
    write_image(ws, "t", FLAT.format(url=url, fingerprint=fingerprint).replace(
        "packages: [cuda-demo-dev-13-0]", "packages: [cuda-demo-dev-13-0=13.0.99-1]"))
    proc = run_in_process(["lock", "t"], ws)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "no version 13.0.99-1 of 'cuda-demo-dev-13-0'" in proc.stderr
    assert "it has 13.0.48-1, 13.0.88-1" in proc.stderr
    write_image(ws, "t", FLAT.format(url=url, fingerprint=fingerprint).replace(
        "packages: [cuda-demo-dev-13-0]", "packages: [cuda-demo-dev-13-0==13]"))
    refused(ws, ["lock", "t"], "cuda-demo", "system.packages")


def test_a_flat_archive_signed_by_another_key_is_refused(ws, flat_archive, tmp_path):
    url, _, _ = flat_archive
    other = new_key(tmp_path / "other-key", "other")
    write_image(ws, "t", FLAT.format(url=url, fingerprint=other))
    proc = run_in_process(["lock", "t"], ws)
    assert proc.returncode == 1
    assert f"the signature on {url}/sbsa/InRelease does not verify by the key {other}" in proc.stderr
    entry = json.loads((ws / "lockfiles/t.lock").read_text())["inputs"]["runtime.system@linux/amd64"]
    assert entry.get("resolved") is None and "does not verify" in entry["unresolved"]
    assert run_in_process(["image", "t"], ws).returncode == 2  # nothing is built from an unverified archive


def test_an_archive_keyring_without_its_fingerprint_is_refused(ws):
    write_image(ws, "t", SCRATCH + 'system:\n  archives:\n    - {url: "https://example.invalid/r", suite: sbsa, '
                                   'flat: true, keyring: {url: "https://example.invalid/r/k.pub"}}\n'
                                   "  packages: [cuda-x]\n")
    refused(ws, ["lock", "t"], "5", "fingerprint")


# -- 7. the runtime's settings ------------------------------------------------------------------------

def test_healthcheck_shell_user_workdir_and_stopsignal_reach_the_image(ws):
    write_image(ws, "t", SCRATCH + dedent("""
        healthcheck: {test: "wget -q -O- http://127.0.0.1:8000/health || exit 1", interval: 30s, timeout: 5s,
                      start-period: 2m, retries: 3}
        shell: ["/bin/bash", "-o", "pipefail", "-c"]
        user: "1000:1000"
        workdir: /srv
        stopsignal: SIGINT
        """))
    settings = rendered(ws, "t", "--unpinned").split("### runtime image")[1].splitlines()
    assert [line for line in settings if line.split(" ")[0] in ("WORKDIR", "USER", "SHELL", "STOPSIGNAL", "HEALTHCHECK")] \
        == ["WORKDIR /srv", 'USER 1000:1000', 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]', "STOPSIGNAL SIGINT",
            'HEALTHCHECK --interval=30s --timeout=5s --start-period=2m --retries=3 CMD ["/bin/sh", "-c", '
            '"wget -q -O- http://127.0.0.1:8000/health || exit 1"]']


def test_a_healthcheck_in_dockers_own_form_is_taken_as_docker_takes_it(ws):
    """`["CMD", ...]` and `["CMD-SHELL", "..."]`, as Docker and Compose write them, are not
    wrapped again; `["NONE"]` turns the base's check off; a malformed one is refused."""
    forms = {'["CMD", "curl", "-f", "http://127.0.0.1:8000/health"]':
             'HEALTHCHECK CMD ["curl", "-f", "http://127.0.0.1:8000/health"]',
             '["CMD-SHELL", "curl -f http://127.0.0.1:8000/health || exit 1"]':
             'HEALTHCHECK CMD ["/bin/sh", "-c", "curl -f http://127.0.0.1:8000/health || exit 1"]',
             '["curl", "-f", "http://127.0.0.1:8000/health"]':
             'HEALTHCHECK CMD ["curl", "-f", "http://127.0.0.1:8000/health"]',
             '["NONE"]': "HEALTHCHECK NONE"}
    for test, line in forms.items():
        write_image(ws, "t", SCRATCH + f"healthcheck: {{test: {test}}}\n")
        settings = rendered(ws, "t", "--unpinned").split("### runtime image")[1].splitlines()
        assert [s for s in settings if s.startswith("HEALTHCHECK")] == [line], test
    write_image(ws, "t", SCRATCH + 'healthcheck: {test: ["CMD-SHELL", "curl", "-f"]}\n')
    assert "CMD-SHELL takes one shell command after it" in refused(ws, ["render", "t", "--unpinned"], "3",
                                                                   "healthcheck.test")


def test_a_docker_form_healthcheck_makes_a_container_healthy(ws, docker_engine, debian_reachable):
    for test in ('["CMD", "/bin/true"]', '["CMD-SHELL", "test -d /bin && true"]'):
        write_image(ws, "healthy", SCRATCH + dedent(f"""
            system:
              install: extract
              packages: [busybox-static]
              run: [["/bin/busybox", "--install", "-s", "/bin"]]
            cmd: ["/bin/sleep", "120"]
            healthcheck: {{test: {test}, interval: 1s, timeout: 5s, retries: 3}}
            """))
        assert run_in_process(["lock", "healthy"], ws).returncode == 0
        proc = run_in_process(["image", "healthy"], ws)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        config = json.loads(docker("image", "inspect", "enginebuild/healthy:latest").stdout)[0]["Config"]["Healthcheck"]
        assert config["Test"] == json.loads(test), config
        container = docker("run", "-d", "enginebuild/healthy:latest").stdout.strip()
        try:
            status = ""
            for _ in range(120):  # the engine runs the check each second; a broken one never gets here
                status = docker("inspect", "-f", "{{.State.Health.Status}}", container).stdout.strip()
                if status != "starting":
                    break
                time.sleep(0.5)
            assert status == "healthy", (test, status, docker("inspect", container).stdout[-2000:])
        finally:
            docker("rm", "-f", container)


def test_system_run_takes_one_shell_command_or_a_list_of_commands(ws):
    """`system.run: "cmd"` is one shell command (as the docs allow); a list holds commands in
    either form; a wrong shape says what is expected in words."""
    base = SCRATCH + "system:\n  install: extract\n  packages: [busybox-static]\n"
    write_image(ws, "t", base + '  run: "mkdir -p /srv && touch /srv/ready"\n')
    one = rendered(ws, "t", "--unpinned")
    write_image(ws, "t", base + '  run: ["mkdir -p /srv && touch /srv/ready"]\n')
    assert rendered(ws, "t", "--unpinned") == one and "touch /srv/ready" in one
    write_image(ws, "t", base + '  run: [["/bin/busybox", "--install", "-s", "/bin"], "touch /srv/ready"]\n')
    both = rendered(ws, "t", "--unpinned")
    assert '"/bin/busybox", "--install"' in both and "touch /srv/ready" in both
    write_image(ws, "t", base + "  run: {a: b}\n")
    message = refused(ws, ["render", "t", "--unpinned"], "6", "system.run")
    assert "expected a shell command or a list of commands (each a shell command or an exec-form list of " \
           "strings), got a mapping" in message, message


def test_a_shell_given_as_one_string_is_refused(ws):
    write_image(ws, "t", SCRATCH + 'shell: "/bin/bash -c"\n')
    refused(ws, ["render", "t", "--unpinned"], "3", "shell")


# -- 8. git sources with what builds need: submodules, metadata, or a version ------------------------

def test_a_git_source_can_inject_its_version_for_setuptools_scm(ws):
    write_image(ws, "t", COMPONENT.replace("source: {path: src}", 'source: {git: {url: "https://github.com/vllm-project/vllm", '
                                           'ref: v0.29.0, version: "0.29.0+spark"}}'), COMPONENT_FILES)
    text = rendered(ws, "t", "--unpinned")
    assert 'SETUPTOOLS_SCM_PRETEND_VERSION="0.29.0+spark"' in text
    assert "components.e.source: kind git, url https://github.com/vllm-project/vllm, ref v0.29.0" in text


def test_a_git_source_with_a_malformed_version_is_refused(ws):
    write_image(ws, "t", COMPONENT.replace("source: {path: src}", 'source: {git: {url: "https://github.com/x/y", '
                                           'ref: main, version: "latest please"}}'), COMPONENT_FILES)
    refused(ws, ["render", "t", "--unpinned"], "11", "version")


# -- 9. URL inputs pinned by sha256 --------------------------------------------------------------------

def test_a_url_file_is_fetched_on_the_host_verified_and_placed(ws, www, tmp_path, docker_engine):
    folder, url = www
    (folder / "tokenizer.json").write_text('{"vocab": {}}\n')
    sha = hashlib.sha256(b'{"vocab": {}}\n').hexdigest()
    write_image(ws, "t", SCRATCH + f'files:\n  /opt/tok/tokenizer.json: {{url: "{url}/tokenizer.json", sha256: {sha}}}\n')
    assert run_in_process(["lock", "t"], ws).returncode == 0
    assert run_in_process(["fetch", "t"], ws).returncode == 0
    out = tmp_path / "out"
    assert run_in_process(["render", "t", "--out", out], ws).returncode == 0
    placed = list((out / "linux-amd64/runtime-tail/files").rglob("tokenizer.json"))
    assert [p.read_text() for p in placed] == ['{"vocab": {}}\n']


def test_a_url_file_whose_bytes_differ_from_its_sha256_is_refused(ws, www):
    folder, url = www
    (folder / "tokenizer.json").write_text("changed upstream\n")
    write_image(ws, "t", SCRATCH + f'files:\n  /opt/tokenizer.json: {{url: "{url}/tokenizer.json", sha256: "{"0" * 64}"}}\n')
    assert run_in_process(["lock", "t"], ws).returncode == 0
    proc = run_in_process(["fetch", "t"], ws)
    assert proc.returncode == 1
    assert f"{url}/tokenizer.json" in proc.stderr and "sha256" in proc.stderr, proc.stderr
    write_image(ws, "t", SCRATCH + f'files:\n  /opt/tokenizer.json: {{url: "{url}/tokenizer.json"}}\n')
    refused(ws, ["lock", "t"], "4", "sha256")


# -- 10. build scripts run by their own interpreter; names real projects use --------------------------

BASH_BUILDER = """base: scratch
platform: linux/amd64
builder:
  base: scratch
  system:
    install: extract
    packages: [busybox-static, bash]
    run: [["/bin/busybox", "--install", "-s", "/bin"]]
components:
  llama.cpp:
    source: {path: src}
    build: {script: build.sh}
    outputs: {paths: [/out/which-shell]}
install: [llama.cpp]
"""


def test_a_bash_build_script_runs_under_bash_in_a_component_named_with_a_dot(ws, docker_engine, debian_reachable):
    write_image(ws, "bash-build", BASH_BUILDER, {"src/a.c": "int a;\n", "build.sh": (
        '#!/bin/bash\nset -euo pipefail\nmkdir -p /out\n[[ -n "${BASH_VERSION:-}" ]] && echo "bash $BASH_VERSION" '
        "> /out/which-shell\n")})
    assert run_in_process(["lock", "bash-build"], ws).returncode == 0
    proc = run_in_process(["image", "bash-build"], ws)
    assert proc.returncode == 0, proc.stderr
    out = read_file("enginebuild/bash-build:latest", "/out/which-shell").decode()
    assert "bash 5." in out


def test_a_component_name_with_spaces_or_capitals_is_refused(ws):
    write_image(ws, "t", BASH_BUILDER.replace("llama.cpp:", "Llama CPP:").replace("[llama.cpp]", "[Llama CPP]"),
                {"src/a.c": "int a;\n", "build.sh": "#!/bin/bash\n"})
    refused(ws, ["render", "t", "--unpinned"], "10", "Llama CPP")


# -- 11. build arguments and the model's quantization ------------------------------------------------

def test_a_build_arg_override_names_an_argument_a_component_has(ws):
    write_image(ws, "t", COMPONENT, COMPONENT_FILES)
    assert 'OPT="-O3"' in rendered(ws, "t", "--unpinned", "--build-arg", "OPT=-O3")
    for verb in (["render", "t", "--unpinned"], ["plan", "t"], ["image", "t"]):
        proc = run_in_process([*verb, "--build-arg", "OTP=-O3"], ws)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "--build-arg OTP: no component of t has a build argument OTP" in proc.stderr
        assert "did you mean OPT (t: component e)?" in proc.stderr


def test_a_build_arg_enginebuild_sets_itself_is_refused_in_the_spec(ws):
    for name in ("SOURCE_DATE_EPOCH", "PYTHONHASHSEED", "ENGINEBUILD_OUTPUTS"):
        write_image(ws, "t", COMPONENT.replace('args: {OPT: "-O2"}', f'args: {{OPT: "-O2", {name}: "7"}}'),
                    COMPONENT_FILES)
        error = refused(ws, ["render", "t", "--unpinned"], "args:", f"components.e.build.args.{name}: {name} is set "
                        "by enginebuild")
        assert "drop it from build.args" in error


def test_the_model_quantization_takes_any_format_name_and_refuses_a_sentence(ws):
    for name in ("IQ3_XXS", "Q4_K_M", "vq-2bit", "NVFP4"):
        write_image(ws, "t", COMPONENT + f"model: {{quantization: {name}}}\n", COMPONENT_FILES)
        assert "FROM" in rendered(ws, "t", "--unpinned")
    write_image(ws, "t", COMPONENT + "model: {quantization: \"four bits please\"}\n", COMPONENT_FILES)
    refused(ws, ["render", "t", "--unpinned"], "quantization", "model.quantization")


def test_set_reaches_a_key_with_dots_in_brackets_and_names_the_brackets_for_the_dotted_form(ws):
    write_image(ws, "t", COMPONENT.replace("  e:\n", "  llama.cpp:\n").replace("install: [e]", "install: [llama.cpp]")
                + "labels: {dev.x.y: one}\n", COMPONENT_FILES)
    proc = run_in_process(["--set", "components[llama.cpp].build.args.OPT=-O1", "--set", "labels[dev.x.y]=two",
                    "render", "t", "--unpinned"], ws)
    assert proc.returncode == 0, proc.stderr
    assert 'OPT="-O1"' in proc.stdout and '"dev.x.y"="two"' in proc.stdout
    proc = run_in_process(["--set", "components.llama.cpp.build.args.OPT=-O1", "render", "t", "--unpinned"], ws)
    assert proc.returncode == 2 and "components has no key 'llama', but has 'llama.cpp'" in proc.stderr
    assert "hint: --set components[llama.cpp].build.args.OPT=…" in proc.stderr


# -- 12. components nothing installs or needs ----------------------------------------------------------

def test_only_components_the_runtime_installs_or_needs_are_planned_and_a_leftover_is_named(ws, debian_reachable,
                                                                                         pypi_reachable):
    write_image(ws, "t", BUSYBOX_BUILDER + """components:
  base-lib:
    source: {path: src}
    build: {script: build.sh}
    outputs: {paths: [/x]}
  engine:
    source: {path: src}
    needs: [base-lib]
    build: {script: build.sh}
    outputs: {paths: [/x]}
  experiment:
    source: {pypi: {name: six, version: "1.16.0"}}
    build: {script: build.sh}
    outputs: {paths: [/x]}
install: [engine]
""", COMPONENT_FILES)
    text = rendered(ws, "t", "--unpinned")
    assert "### component base-lib" in text and "### component engine" in text
    assert "### component experiment" not in text
    assert run_in_process(["lock", "t"], ws).returncode == 0
    locked = json.loads((ws / "lockfiles/t.lock").read_text())["inputs"]
    assert not [n for n in locked if n.startswith("components.experiment.")]  # not built: not locked
    proc = run_in_process(["plan", "t", "--json"], ws)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)["images"][0]
    assert sorted(c["name"] for c in doc["components"]) == ["base-lib", "engine"]
    assert doc["unused_components"] == ["experiment"]
    plain = run_in_process(["plan", "t"], ws).stdout
    assert re.search(r"component experiment .* not built: nothing installs or needs it", plain), plain
    from enginebuild.lock.lockfile import read_lock
    from enginebuild.plan.image import Options, plan_image
    from enginebuild.recipe.catalog import Catalog

    spec = Catalog(ws).load("t")
    manifest = plan_image(spec, read_lock(ws, spec), "linux/amd64", Options()).manifest
    assert manifest["components"] == ["base-lib", "engine"]  # what is not built is not listed
    assert not [n for n in manifest["inputs"] if n.startswith("components.experiment.")]


# -- 13. image --output ------------------------------------------------------------------------------

def test_output_writes_the_runtime_filesystem_and_a_components_outputs_to_new_folders(ws, tmp_path, docker_engine,
                                                                                    debian_reachable):
    write_image(ws, "t", COMPONENT, COMPONENT_FILES)
    assert run_in_process(["lock", "t"], ws).returncode == 0
    runtime, built = tmp_path / "rootfs", tmp_path / "built"
    proc = run_in_process(["image", "t", "--output", str(runtime), "--output", f"e={built}"], ws)
    assert proc.returncode == 0, proc.stderr
    assert (built / "x").read_text() == "built\n" and sorted(p.name for p in built.iterdir()) == ["x"]
    assert (runtime / "x").read_text() == "built\n"
    manifest = json.loads((runtime / "opt/enginebuild/manifest.json").read_text())
    assert manifest["image"] == "t"
    assert not list(tmp_path.glob(".*"))  # no staging folder left beside them


def test_output_refuses_a_folder_with_files_and_an_unknown_component_before_building(ws, tmp_path):
    write_image(ws, "t", COMPONENT, COMPONENT_FILES)
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine\n")
    proc = run_in_process(["image", "t", "--output", str(full)], ws, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 2 and "exists and is not an empty folder" in proc.stderr, proc.stderr
    assert (full / "keep.txt").read_text() == "mine\n"
    proc = run_in_process(["image", "t", "--output", f"f={tmp_path / 'new'}"], ws, env={"ENGINEBUILD_DOCKER": "/bin/false"})
    assert proc.returncode == 2 and "t has no component 'f'" in proc.stderr, proc.stderr
    assert not (tmp_path / "new").exists()


# -- 14. named environments ----------------------------------------------------------------------------

# a scratch runtime with busybox's shell and tools
BUSYBOX_RUNTIME = SCRATCH + """system:
  install: extract
  packages: [busybox-static]
  run: [["/bin/busybox", "--install", "-s", "/bin"]]
"""

NAMED = BUSYBOX_RUNTIME + """environments:
  tools:
    base: scratch
    system:
      install: extract
      packages: [busybox-static, make]
      run: [["/bin/busybox", "--install", "-s", "/bin"]]
components:
  a:
    source: {path: src}
    builder: tools
    build: {script: build.sh}
    outputs: {paths: [/x]}
  b:
    source: {path: src}
    builder: tools
    needs: [a]
    build: {script: build.sh}
    outputs: {paths: [/y]}
  c:
    source: {path: src}
    builder: runtime
    build: {script: build.sh}
    outputs: {paths: [/z]}
install: [b, c]
"""


def test_a_named_environment_is_written_once_and_shared_by_the_components_that_name_it(ws, debian_reachable):
    write_image(ws, "t", NAMED, COMPONENT_FILES)
    proc = run_in_process(["lock", "t"], ws)
    assert proc.returncode == 0, proc.stderr
    inputs = json.loads((ws / "lockfiles/t.lock").read_text())["inputs"]
    systems = sorted(name for name in inputs if ".system@" in name)
    # one entry for the named environment (both components), none extra for the runtime's
    assert systems == ["components.a.builder.system@linux/amd64", "runtime.system@linux/amd64"], systems
    assert "make" in inputs["components.a.builder.system@linux/amd64"]["request"]["packages"]
    text = rendered(ws, "t")
    parents = {m.group(1): m.group(2) for m in re.finditer(r"### component (\w+) .*\n.*\nFROM (\S+)", text)}
    assert parents["a"] == parents["b"] != parents["c"], parents


def test_a_builder_naming_an_environment_nobody_declared_is_refused_with_a_guess(ws):
    write_image(ws, "t", NAMED.replace("    builder: tools\n    needs", "    builder: tols\n    needs"),
                COMPONENT_FILES)
    error = refused(ws, ["lock", "t"], "builder: tols", "components.b.builder: no environment named 'tols'")
    assert "did you mean 'tools'?" in error


# -- 15. label-only images ----------------------------------------------------------------------------

@pytest.mark.docker
@pytest.mark.registry
def test_a_label_only_image_keeps_its_bases_layers_as_they_are_and_carries_its_manifest_as_a_label(
        ws, registry, docker_engine):
    from helpers.docker import inspect
    from helpers.registry import push_files_image

    repository = f"enginebuild-test/label-base-{uuid.uuid4().hex[:6]}"
    push_files_image(registry.host, repository, "1", {"etc/flavour": b"base\n"})
    write_image(ws, "mirror", f"base: {registry.host}/{repository}:1\nplatform: linux/amd64\n"
                              "labels: {org.example.mirror: 'yes'}\nenv: {MIRRORED: '1'}\n")
    assert run_in_process(["lock", "mirror"], ws).returncode == 0
    assert "manifest" not in run_in_process(["plan", "mirror"], ws).stdout.split("component")[0].split("\n", 1)[1]
    proc = run_in_process(["image", "mirror"], ws)
    assert proc.returncode == 0, proc.stderr
    lock = json.loads((ws / "lockfiles/mirror.lock").read_text())
    base = inspect(f"{registry.host}/{repository}@{lock['inputs']['runtime.base@linux/amd64']['resolved']['digest']}")
    mirror = inspect("enginebuild/mirror:latest")
    assert mirror["RootFS"]["Layers"] == base["RootFS"]["Layers"]  # byte for byte: the same diff ids
    labels = mirror["Config"]["Labels"]
    assert labels["org.example.mirror"] == "yes"
    manifest = json.loads(labels["org.enginebuild.manifest"])
    assert manifest["image"] == "mirror" and "runtime.base@linux/amd64" in manifest["inputs"]


def test_manifest_label_moves_the_manifest_of_an_image_with_files_out_of_its_layers(ws):
    write_image(ws, "t", SCRATCH + "manifest: label\nfiles:\n  /wheels/a.whl: a.whl\n", {"a.whl": "not a wheel\n"})
    assert run_in_process(["lock", "t"], ws).returncode == 0
    text = rendered(ws, "t")
    assert "/opt/enginebuild/manifest.json" not in text.split("LABEL")[0]
    assert '"org.enginebuild.manifest"="{' in text
    write_image(ws, "t", SCRATCH + "manifest: labels\n")
    refused(ws, ["lock", "t"], "manifest", "manifest: expected one of layer, label")


# -- 16. init: true -----------------------------------------------------------------------------------

SLEEPER = BUSYBOX_RUNTIME + 'entrypoint: ["/bin/sh", "-c", "exec sleep 1000"]\n'


@pytest.mark.docker
def test_init_runs_tini_as_pid_1_so_a_launcher_that_ignores_sigterm_stops(ws, docker_engine, debian_reachable):
    codes = {}
    for name, extra in (("no-init", ""), ("with-init", "init: true\n")):
        write_image(ws, name, SLEEPER + extra)
        assert run_in_process(["lock", name], ws).returncode == 0
        proc = run_in_process(["image", name], ws)
        assert proc.returncode == 0, proc.stderr
        container = docker("run", "-d", f"enginebuild/{name}:latest").stdout.strip()
        try:
            # stopped once sleep runs (as a launcher would be by then), never while tini or the
            # shell is still starting it: what a signal meets then is not the question here
            for _ in range(300):
                if "sleep 1000" in docker("top", container, check=False).stdout:
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"{name}: sleep did not start: {docker('logs', container, check=False).stderr}")
            docker("stop", "-t", "3", container, timeout=60)
            codes[name] = json.loads(docker("inspect", container).stdout)[0]["State"]["ExitCode"]
        finally:
            docker("rm", "-f", container, check=False)
    lock = json.loads((ws / "lockfiles/with-init.lock").read_text())
    assert "tini" in [p["name"] for p in lock["inputs"]["runtime.system@linux/amd64"]["resolved"]["packages"]]
    entrypoint = json.loads(docker("image", "inspect", "enginebuild/with-init:latest").stdout)[0]["Config"]["Entrypoint"]
    assert entrypoint == ["/usr/bin/tini-static", "--", "/bin/sh", "-c", "exec sleep 1000"]
    # sleep as PID 1 ignores SIGTERM: killed after the grace time; under tini it ends on the signal
    assert codes == {"no-init": 137, "with-init": 143}, codes


# -- 17. editable installs (`pip install -e .`) ----------------------------------------------------------

EDITABLE = "base: scratch\nplatform: linux/amd64\n" + DEBIAN_PYTHON + """python:
  version: "3.11"
  requirements:
    - {requirement: edpkg, component: edpkg}
    - pip==25.3
builder:
  base: scratch
""" + indent(DEBIAN_PYTHON, "  ") + """  python:
    version: "3.11"
    requirements: ["setuptools==80.9.0"]
components:
  edpkg:
    source: {path: edpkg}
    build: {script: build.sh}
    outputs: {editable: /app/edpkg}
entrypoint: ["/usr/bin/python3"]
"""
EDITABLE_FILES = {
    "edpkg/pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
                            '[project]\nname = "edpkg"\nversion = "1.0"\ndependencies = ["six>=1.16"]\n\n'
                            '[tool.setuptools]\npackages = ["edpkg"]\n',
    "edpkg/edpkg/__init__.py": "import six\nWHERE = 'tree'\n",
    # what the recipe does before `pip install -e .`: here, a file generated in the tree
    "build.sh": "#!/bin/sh\nset -e\necho \"GENERATED = '$(pwd)'\" > edpkg/generated.py\n",
}


@pytest.mark.docker
def test_an_editable_component_keeps_its_tree_in_the_image_and_imports_from_it(ws, docker_engine, pypi_reachable,
                                                                            debian_reachable):
    write_image(ws, "ed", EDITABLE, EDITABLE_FILES)
    proc = run_in_process(["lock", "ed"], ws)
    assert proc.returncode == 0, proc.stderr
    pins = {p["name"]: p for p in json.loads((ws / "lockfiles/ed.lock").read_text())
            ["inputs"]["runtime.python@linux/amd64"]["resolved"]["packages"]}
    assert pins["edpkg"]["origin"] == "component" and "six" in pins  # its needs, from pyproject.toml
    plan = run_in_process(["plan", "ed"], ws)
    assert plan.returncode == 0 and "tree of edpkg (editable, /app/edpkg)" in plan.stdout, plan.stdout + plan.stderr
    tag = "enginebuild/ed:latest"
    try:
        proc = run_in_process(["image", "ed"], ws)
        assert proc.returncode == 0, proc.stderr
        code = ("import edpkg, edpkg.generated, json, importlib.metadata as m\n"
                "print(edpkg.__file__, edpkg.generated.GENERATED, edpkg.WHERE)\n"
                "print(json.loads(m.distribution('edpkg').read_text('direct_url.json')))")
        out = docker("run", "--rm", tag, "-c", code, check=False)
        assert out.returncode == 0, out.stderr
        where, direct = out.stdout.strip().splitlines()
        assert where == "/app/edpkg/edpkg/__init__.py /app/edpkg tree"  # built where the image keeps it
        assert direct == "{'dir_info': {'editable': True}, 'url': 'file:///app/edpkg'}"
        # what an editable install is for: an edit of the tree is what the next import sees
        edited = docker("run", "--rm", "--entrypoint", "/bin/sh", tag, "-c",
                        "sed -i s/tree/edited/ /app/edpkg/edpkg/__init__.py && "
                        "python3 -c 'import edpkg; print(edpkg.WHERE)' && python3 -m pip list -e", check=False)
        assert edited.returncode == 0, edited.stderr
        assert edited.stdout.splitlines()[0] == "edited" and re.search(r"edpkg\s+1\.0\s+/app/edpkg", edited.stdout)
        assert_pip_check_clean(tag)
    finally:
        docker("rmi", "-f", tag, check=False)


def test_an_editable_output_without_a_source_or_named_by_install_is_refused(ws):
    write_image(ws, "t", EDITABLE.replace("    source: {path: edpkg}\n", ""), EDITABLE_FILES)
    refused(ws, ["render", "t", "--unpinned"], "outputs: {editable",
            "components.edpkg.outputs.editable: an editable install keeps the component's source tree: it has no")
    write_image(ws, "t", EDITABLE + "install: [edpkg]\n", EDITABLE_FILES)
    refused(ws, ["render", "t", "--unpinned"], "install: [edpkg]",
            r"install\[0\]: component edpkg is an editable install: the Python requirement naming it installs it")


def test_a_builder_unpacked_on_scratch_without_a_shell_is_refused_before_the_build(ws, debian_reachable):
    """`install: extract` unpacks what is listed and what it depends on, not Debian's essential
    packages: a builder of `hello` alone has no /bin/sh, and the plan says so (not BuildKit's
    "exec /opt/enginebuild/build.sh: no such file or directory")."""
    write_image(ws, "noshell", SCRATCH + dedent("""
        builder:
          base: scratch
          system: {install: extract, packages: [hello]}
        components:
          e:
            build: {script: build.sh}
            outputs: {paths: [/opt/e]}
        install: [e]
        """), {"build.sh": "#!/bin/sh\nmkdir -p /opt/e\n"})
    assert run_in_process(["lock", "noshell"], ws).returncode == 0
    proc = run_in_process(["image", "noshell"], ws)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "components.e.builder: the builder is scratch with" in proc.stderr and "no shell among them" in proc.stderr
    assert "busybox-static" in proc.stderr and "Traceback" not in proc.stderr


def test_a_component_built_on_the_runtime_sees_build_env_as_the_steps_do(ws, docker_engine, debian_reachable):
    write_image(ws, "onruntime", SCRATCH + dedent("""
        system:
          install: extract
          packages: [busybox-static]
          run: [["/bin/busybox", "--install", "-s", "/bin"]]
        build-env: {FLAVOUR: spicy}
        components:
          e:
            builder: runtime
            build: {script: build.sh}
            outputs: {paths: [/opt/e]}
        install: [e]
        steps:
          - "echo step:$FLAVOUR > /opt/step.txt"
        """), {"build.sh": "#!/bin/sh\nset -eu\nmkdir -p /opt/e\necho component:$FLAVOUR > /opt/e/flavour.txt\n"})
    assert run_in_process(["lock", "onruntime"], ws).returncode == 0
    proc = run_in_process(["image", "onruntime"], ws)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert read_file("enginebuild/onruntime:latest", "/opt/e/flavour.txt") == b"component:spicy\n"
    assert read_file("enginebuild/onruntime:latest", "/opt/step.txt") == b"step:spicy\n"


def test_the_default_builder_is_not_locked_when_no_component_builds_on_it(ws):
    write_image(ws, "t", "base: debian:bookworm-slim\nplatform: linux/amd64\n" + dedent("""
        builder:
          base: debian:bookworm
          system: {packages: [gcc]}
        system: {packages: [curl]}
        components:
          e:
            builder: runtime
            build: {script: build.sh}
            outputs: {paths: [/opt/e]}
        install: [e]
        """), {"build.sh": "#!/bin/sh\nmkdir -p /opt/e\n"})
    text = rendered(ws, "t", "--unpinned")
    assert "runtime.system@linux/amd64" in text and "builder." not in text, text
    write_image(ws, "t", (ws / "images/t/image.yaml").read_text().replace("    builder: runtime\n", ""))
    assert "builder.base@linux/amd64" in rendered(ws, "t", "--unpinned")  # built on it: locked


def test_expose_takes_a_udp_port_as_docker_does(ws):
    write_image(ws, "t", SCRATCH + "expose: [8000, 5353/udp, 8000/tcp, \"9000\"]\n")
    runtime = rendered(ws, "t", "--unpinned").split("### runtime image")[1]
    assert [line for line in runtime.splitlines() if line.startswith("EXPOSE")] == ["EXPOSE 8000", "EXPOSE 5353/udp", "EXPOSE 9000"]
    write_image(ws, "t", SCRATCH + "expose: [70000/udp]\n")
    assert "port 70000 is not between 1 and 65535" in refused(ws, ["render", "t", "--unpinned"], "3", "expose")


def test_a_misspelt_debian_package_is_named_with_a_did_you_mean_not_a_network_hint(ws, debian_reachable):
    write_image(ws, "t", SCRATCH + "system: {install: extract, packages: [busybox-statik]}\n")
    proc = run_in_process(["image", "t"], ws)
    assert proc.returncode != 0 and "no package 'busybox-statik'" in proc.stderr, proc.stderr
    assert "hint: did you mean busybox-static?" in proc.stderr, proc.stderr
    assert "where its source is reachable" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_label_set_to_null_removes_the_bases_label(ws, docker_engine, debian_reachable, registry):
    """`labels: {KEY: null}` (in the spec, or `--set 'labels[KEY]=null'`) removes a label the base
    image carries, which a Dockerfile cannot do (render says so in a comment)."""
    write_image(ws, "labelled", SCRATCH + dedent("""
        system: {install: extract, packages: [busybox-static]}
        labels: {org.example.kept: "yes", org.example.vendor: acme}
        """))
    assert run_in_process(["lock", "labelled"], ws).returncode == 0
    base = f"{registry.host}/enginebuild-test/labelled-{uuid.uuid4().hex[:8]}"
    pushed = run_in_process(["image", "labelled", "--push", "--to", base, "--push-tag", "v1"], ws)
    assert pushed.returncode == 0, pushed.stdout[-2000:] + pushed.stderr[-2000:]
    write_image(ws, "child", f"base: {base}:v1\nplatform: linux/amd64\nlabels: {{org.example.vendor: null}}\n")
    assert "# label org.example.vendor removed by enginebuild" in rendered(ws, "child", "--unpinned")
    assert run_in_process(["lock", "child"], ws).returncode == 0
    for args, gone, kept in ((["image", "child"], "org.example.vendor", "org.example.kept"),
                             (["image", "child", "--set", "labels[org.example.kept]=null", "--set",
                               "labels[org.example.vendor]=acme"], "org.example.kept", "org.example.vendor")):
        proc = run_in_process(args, ws)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        labels = json.loads(docker("image", "inspect", "enginebuild/child:latest").stdout)[0]["Config"]["Labels"]
        assert gone not in labels and kept in labels, (args, labels)


def test_a_component_on_a_runtime_with_no_layer_under_it_gets_build_env_in_its_own_build(ws):
    """The chain's variables reach a build through the chain image's config: with no layer under the
    component (a base with nothing added) there is none, and the build set them itself or not at all."""
    write_image(ws, "t", "base: debian:bookworm-slim\nplatform: linux/amd64\n" + dedent("""
        build-env: {FLAVOUR: spicy}
        components:
          e:
            builder: runtime
            build: {script: build.sh}
            outputs: {paths: [/opt/e]}
        install: [e]
        """), {"build.sh": "#!/bin/sh\nmkdir -p /opt/e\necho $FLAVOUR > /opt/e/flavour\n"})
    component = rendered(ws, "t", "--unpinned").split("### component e")[1]
    env = next(line for line in component.splitlines() if line.startswith("ENV "))
    assert 'FLAVOUR="spicy"' in env, env
