"""Spec values that reach a Dockerfile or a shell line stay values: no extra instruction, no command run."""
import json
import re

import pytest

from conftest import run_cli
from helpers import report
from helpers.docker import docker, inspect
from helpers.specs import write_image

pytestmark = [pytest.mark.docker, pytest.mark.network]

HOSTILE = {
    "SUBSHELL": "$(touch /canary-subshell)",
    "BACKTICKS": "`touch /canary-backticks`",
    "QUOTES": "\"; touch /canary-quotes; echo \"",
    "SINGLE": "'; touch /canary-single; echo '",
    "BACKSLASH": "ends with a backslash \\",
    "DOLLAR": "${PATH} and $HOME stay literal",
    "INSTRUCTION": "x\" \\\nRUN touch /canary-instruction",
}
HOSTILE_LABELS = {"org.example.a": "$(touch /canary-label)", "org.example.b": "\" LABEL injected=\"1"}
BUILD_SCRIPT = """#!/bin/sh
set -eu
mkdir -p /opt/args
for name in SUBSHELL BACKTICKS QUOTES SINGLE BACKSLASH DOLLAR; do
    eval "printf '%s' \\"\\${$name}\\"" > "/opt/args/$name"
done
"""


def spec_text(env: dict, labels: dict, args: dict) -> str:
    return "\n".join([
        "base: scratch", "platform: linux/amd64",
        "system:", "  install: extract", "  packages: [busybox-static]",
        "  run:", '    - ["/bin/busybox", "--install", "-s", "/bin"]', '    - "mkdir -p /tmp && chmod 1777 /tmp"',
        "builder:", "  base: scratch", "  system:", "    install: extract", "    packages: [busybox-static]",
        "    run:", '      - ["/bin/busybox", "--install", "-s", "/bin"]',
        "components:", "  probe:", "    source: {path: src}", "    build:", "      script: build.sh",
        "      args: " + json.dumps(args), "    outputs: {paths: [/opt/args]}", "install: [probe]",
        "env: " + json.dumps(env), "labels: " + json.dumps(labels),
        'entrypoint: ["/bin/sh", "-c", "ls /"]', ""])


def instructions(dockerfile: str) -> list:
    return [line.split()[0] for line in dockerfile.splitlines() if line.strip() and not line.startswith("#")]


def test_a_dollar_that_starts_no_variable_is_refused_in_env(workspace):
    write_image(workspace, "inj", spec_text({"A": "$(touch /canary)"}, {}, {}), {"build.sh": BUILD_SCRIPT, "src/x": "x\n"})
    proc = run_cli(["lock", "inj"], workspace)
    assert proc.returncode == 2 and "env.A: a `$` that starts no variable reference" in proc.stderr
    report.count("injection", "values refused")


def test_values_with_line_breaks_never_reach_a_dockerfile(workspace):
    write_image(workspace, "inj", spec_text({"A": HOSTILE["INSTRUCTION"]}, {}, {}),
                {"build.sh": BUILD_SCRIPT, "src/x": "x\n"})
    proc = run_cli(["render", "inj"], workspace)
    assert proc.returncode == 2 and "newlines and NUL bytes are not allowed" in proc.stderr
    report.count("injection", "values refused")


def test_hostile_values_stay_literal_and_no_canary_runs(workspace, docker_engine, debian_reachable):
    env = {k: v for k, v in HOSTILE.items() if k != "INSTRUCTION"}
    args = dict(env)
    written = {k: v.replace("$", "$$") for k, v in env.items()}  # in env and build.args, a literal dollar is $$
    write_image(workspace, "inj", spec_text(written, HOSTILE_LABELS, written), {"build.sh": BUILD_SCRIPT,
                                                                                 "src/x": "x\n"})
    assert run_cli(["lock", "inj"], workspace).returncode == 0
    rendered = run_cli(["render", "inj"], workspace)
    assert rendered.returncode == 0, rendered.stderr
    component = rendered.stdout.split("### component probe")[1].split("###")[0].split("\n", 1)[1]
    assert instructions(component) == ["FROM", "ENV", "ADD", "WORKDIR", "RUN"]
    runtime = rendered.stdout.split("### runtime image")[1].split("\n", 1)[1]
    assert instructions(runtime) == ["FROM", "ADD", "RUN", "RUN", "COPY", "COPY", "ENV", "LABEL", "ENTRYPOINT"]
    proc = run_cli(["image", "inj"], workspace)
    assert proc.returncode == 0, proc.stderr
    config = inspect("enginebuild/inj:latest")["Config"]
    image_env = dict(item.split("=", 1) for item in config["Env"])
    for name, value in env.items():
        assert image_env[name] == value
        report.count("injection", "values checked")
    for key, value in HOSTILE_LABELS.items():
        assert config["Labels"][key] == value
        report.count("injection", "values checked")
    assert "injected" not in config["Labels"]
    for name, value in args.items():
        got = docker("run", "--rm", "--entrypoint", "cat", "enginebuild/inj:latest", f"/opt/args/{name}").stdout
        assert got == value
        report.count("injection", "values checked")
    listing = docker("run", "--rm", "enginebuild/inj:latest").stdout
    canaries = re.findall(r"canary\S*", listing)
    report.count("injection", "canaries run", len(canaries))
    assert canaries == []
