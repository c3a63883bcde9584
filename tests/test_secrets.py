"""No secret reaches an image layer, its history, its config, a Dockerfile, a lockfile, our output or logs;
registry passwords never appear on a command line."""
import base64
import io
import json
import os
import shutil
import subprocess
import tarfile
import threading
import uuid
from pathlib import Path

import pytest

from conftest import need, run_cli
from helpers import report
from helpers.docker import docker, read_file
from helpers.registry import start_htpasswd_registry
from helpers.specs import write_image

pytestmark = [pytest.mark.docker, pytest.mark.network]

SENTINEL = "hf_SENTINELsecret" + uuid.uuid4().hex  # looks like a Hugging Face token
BUILD = """#!/bin/sh
set -eu
test -s /run/secrets/HF_TOKEN
mkdir -p /opt/probe
wc -c < /run/secrets/HF_TOKEN > /opt/probe/secret-length
echo "the build printed the token: $(cat /run/secrets/HF_TOKEN)"
"""
SHELL = ["/bin/busybox", "--install", "-s", "/bin"]


def spec(marker: str, script: str = "build.sh", extra: str = "") -> str:
    return "\n".join([
        "base: scratch", "platform: linux/amd64",
        "system:", "  install: extract", "  packages: [busybox-static]",
        "  run:", f"    - {json.dumps(SHELL)}", '    - "mkdir -p /tmp && chmod 1777 /tmp"',
        "builder:", "  base: scratch", "  system:", "    install: extract", "    packages: [busybox-static]",
        "    run:", f"      - {json.dumps(SHELL)}", '      - "mkdir -p /tmp /root && chmod 1777 /tmp"',
        "components:", "  probe:", "    source: {path: src}",
        f"    build: {{script: {script}, secrets: [HF_TOKEN], args: {{RUN_MARKER: \"{marker}\"}}}}",
        "    outputs: {paths: [/opt/probe]}", "install: [probe]",
        "env: {MODEL_PATH: /models/m}", extra])


def hits(data, needle: str) -> int:
    if isinstance(data, str):
        data = data.encode("utf-8", "replace")
    return data.count(needle.encode())


def scan(place: str, data, needle: str) -> int:
    found = hits(data, needle)
    report.count("secrets", "places checked")
    report.count("secrets", "hits", found)
    assert found == 0, f"the secret appears in {place}"
    return found


def test_a_build_secret_reaches_the_build_and_nothing_else(workspace, docker_engine, debian_reachable, eb_home):
    write_image(workspace, "sec", spec(uuid.uuid4().hex), {"build.sh": BUILD, "src/x": "x\n"})
    assert run_cli(["lock", "sec"], workspace).returncode == 0
    proc = run_cli(["image", "sec", "-v"], workspace, env={"HF_TOKEN": SENTINEL})
    assert proc.returncode == 0, proc.stderr
    assert "the build printed the token: [redacted]" in proc.stderr  # the build saw it; we did not repeat it
    length = docker("run", "--rm", "--entrypoint", "cat", "enginebuild/sec:latest", "/opt/probe/secret-length").stdout
    assert int(length) == len(SENTINEL)
    scan("enginebuild's output", proc.stdout + proc.stderr, SENTINEL)
    scan("docker history", docker("history", "--no-trunc", "enginebuild/sec:latest").stdout, SENTINEL)
    scan("docker inspect", docker("image", "inspect", "enginebuild/sec:latest").stdout, SENTINEL)
    saved = subprocess.run(["docker", "save", "enginebuild/sec:latest"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(saved)) as outer:
        for member in outer.getmembers():
            if member.isfile():
                content = outer.extractfile(member).read()
                scan(f"image file {member.name}", content, SENTINEL)
                if member.name.endswith("layer.tar"):
                    with tarfile.open(fileobj=io.BytesIO(content)) as layer:
                        for entry in layer.getmembers():
                            if entry.isfile():
                                scan(f"layer entry {entry.name}", layer.extractfile(entry).read(), SENTINEL)
    scan("rendered Dockerfiles", run_cli(["render", "sec"], workspace).stdout, SENTINEL)
    for path in (workspace / "lockfiles").iterdir():
        scan(str(path), path.read_bytes(), SENTINEL)
    for path in Path(eb_home).rglob("*"):
        if path.is_file() and "cas" not in path.parts:
            scan(str(path), path.read_bytes(), SENTINEL)


def test_registry_passwords_never_appear_on_a_command_line_or_in_output(workspace, docker_engine, tmp_path, eb_home):
    need(shutil.which("htpasswd") is not None, "htpasswd is not installed (apache2-utils; run scripts/setup.sh)")
    password = "pw-" + uuid.uuid4().hex
    registry = start_htpasswd_registry(tmp_path / "reg", "pusher", password)
    try:
        config = tmp_path / "docker-config"
        config.mkdir()
        auth = base64.b64encode(f"pusher:{password}".encode()).decode()
        (config / "config.json").write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}))
        assert run_cli(["image", "demo"], workspace).returncode == 0
        seen, done = [], threading.Event()

        def watch():
            while not done.is_set():
                for pid in os.listdir("/proc"):
                    if pid.isdigit():
                        try:
                            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                        except OSError:
                            continue
                        if password.encode() in cmdline:
                            seen.append(cmdline)
                done.wait(0.005)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            proc = run_cli(["push", "demo", "--to", f"{registry.host}/enginebuild/demo", "--tag", "private"], workspace,
                           env={"DOCKER_CONFIG": str(config)})
        finally:
            done.set()
            watcher.join()
        assert proc.returncode == 0, proc.stderr
        report.count("secrets", "places checked")
        report.count("secrets", "hits", len(seen))
        assert seen == []  # no process of ours (or docker's) had it in its argv
        scan("push output", proc.stdout + proc.stderr, password)
        scan("push record", (workspace / "lockfiles/demo.pushes.json").read_bytes(), password)
        for path in Path(eb_home).rglob("*"):
            if path.is_file() and "cas" not in path.parts:
                scan(str(path), path.read_bytes(), password)
        # and without the credentials the registry refuses: the password was what made it work
        denied = run_cli(["push", "demo", "--to", f"{registry.host}/enginebuild/demo", "--tag", "anon"], workspace,
                         env={"DOCKER_CONFIG": str(tmp_path / "empty-config")})
        assert denied.returncode == 1
    finally:
        registry.stop()


# -- a build that writes a secret (or a credential) into a layer is refused before anything is kept --------

LEAKS = {
    "copied": "mkdir -p /opt/probe && cat /run/secrets/HF_TOKEN > /tmp/leak.txt && cp /run/secrets/HF_TOKEN /opt/probe/",
    "base64": "mkdir -p /opt/probe && base64 /run/secrets/HF_TOKEN > /opt/probe/token.b64",
    "hf-token-file": "mkdir -p /opt/probe /root/.cache/huggingface && "
                     "echo hf_NOTTHESECRETbutAtokenAAAAAAAAAAAAAAAAAAAAA > /root/.cache/huggingface/token",
    "registry-auth-file": "mkdir -p /opt/probe /root/.docker && echo "
                          + repr(json.dumps({"auths": {"ghcr.io": {"auth": "dXNlcjpwYXNzd29yZA=="}}}))
                          + " > /root/.docker/config.json",
}
EXPECTED = {"copied": ("HF_TOKEN", "/opt/probe/HF_TOKEN"), "base64": ("HF_TOKEN", "/opt/probe/token.b64"),
            "hf-token-file": ("huggingface-token-file", "/root/.cache/huggingface/token"),
            "registry-auth-file": ("registry-auth-file", "/root/.docker/config.json")}


@pytest.mark.parametrize("leak", sorted(LEAKS))
def test_a_build_that_writes_a_secret_into_a_layer_is_refused_and_nothing_is_kept(leak, workspace, docker_engine,
                                                                                   debian_reachable, eb_home):
    script = "#!/bin/sh\nset -eu\n" + LEAKS[leak] + "\n"
    name = f"leak-{leak}-{uuid.uuid4().hex[:6]}"
    write_image(workspace, name, spec(uuid.uuid4().hex), {"build.sh": script, "src/x": "x\n"})
    assert run_cli(["lock", name], workspace).returncode == 0
    proc = run_cli(["image", name], workspace, env={"HF_TOKEN": SENTINEL})
    what, path = EXPECTED[leak]
    assert proc.returncode == 1, proc.stderr
    assert "error: component probe wrote a secret into its layers: " in proc.stderr
    assert what in proc.stderr and path in proc.stderr
    scan("the refusal", proc.stderr, SENTINEL)
    assert docker("image", "inspect", f"enginebuild/{name}:latest", check=False).returncode != 0
    plan = json.loads(run_cli(["plan", name, "--json"], workspace).stdout)["images"][0]
    key = plan["components"][0]["key"]
    assert plan["components"][0]["action"] == "build"  # no outputs were recorded for it
    assert key not in docker("images", "enginebuild/component", "--format", "{{.Tag}}").stdout.split()
    assert not (workspace / f"lockfiles/{name}.pushes.json").exists()
    report.count("secret scan", "leaks refused")


def test_the_ci_spread_job_building_one_component_searches_for_secrets_before_the_cache(workspace, docker_engine,
                                                                                      debian_reachable, registry):
    """`image --component NAME --cache REPO` (the spread CI job) built without the secret search:
    the component's outputs (and its compiler cache) went to the registry cache holding the
    declared secret's value. It is refused as the whole image's build is, and nothing is pushed."""
    name = f"leak-spread-{uuid.uuid4().hex[:6]}"
    write_image(workspace, name, spec(uuid.uuid4().hex), {"build.sh": "#!/bin/sh\nset -eu\n" + LEAKS["copied"] + "\n",
                                                          "src/x": "x\n"})
    assert run_cli(["lock", name], workspace).returncode == 0
    cache = f"{registry.host}/enginebuild-test/spread-{uuid.uuid4().hex[:8]}"
    proc = run_cli(["image", name, "--component", "probe", "--cache", cache], workspace, env={"HF_TOKEN": SENTINEL})
    assert proc.returncode == 1, proc.stderr
    assert "error: component probe wrote a secret into its layers: HF_TOKEN in /opt/probe/HF_TOKEN" in proc.stderr
    scan("the refusal", proc.stderr, SENTINEL)
    import requests

    key = json.loads(run_cli(["plan", name, "--json"], workspace).stdout)["images"][0]["components"][0]["key"]
    tags = requests.get(f"http://{registry.host}/v2/{cache.split('/', 1)[1]}/tags/list", timeout=30)
    held = tags.json().get("tags") or [] if tags.status_code == 200 else []
    assert not [t for t in held if t.startswith(key) or t.startswith("cc-")], held  # neither outputs nor caches


def test_a_secret_in_a_copied_file_is_refused_at_build_before_anything_is_tagged(workspace, docker_engine,
                                                                                  debian_reachable, registry, eb_home):
    name = f"shipped-{uuid.uuid4().hex[:6]}"
    write_image(workspace, name, spec(uuid.uuid4().hex, extra="files:\n  /opt/notes.txt: notes.txt\n"),
                {"build.sh": BUILD, "src/x": "x\n", "notes.txt": f"remember {SENTINEL}\n"})
    assert run_cli(["lock", name], workspace).returncode == 0
    proc = run_cli(["image", name], workspace, env={"HF_TOKEN": SENTINEL})
    assert proc.returncode == 1
    assert f"image {name} (linux/amd64) wrote a secret into its layers: HF_TOKEN in /opt/notes.txt" in proc.stderr
    assert docker("image", "inspect", f"enginebuild/{name}:latest", check=False).returncode != 0
    for path in Path(eb_home).rglob("*"):  # the refused layer is not kept in the store either
        if path.is_file() and path.stat().st_size < 1 << 24:
            scan(str(path), path.read_bytes(), SENTINEL)
    pushed = run_cli(["push", name, "--to", f"{registry.host}/enginebuild-test/{name}"], workspace,
                     env={"HF_TOKEN": SENTINEL})
    assert pushed.returncode == 1
    assert not (workspace / f"lockfiles/{name}.pushes.json").exists()
    report.count("secret scan", "pushes refused")


def steps_spec(marker: str, steps: str, script: str = "build.sh") -> str:
    return spec(marker, script) + "\n" + steps


def test_a_secret_carried_through_a_cache_mount_into_another_step_is_refused(workspace, docker_engine,
                                                                            debian_reachable):
    name = f"mount-{uuid.uuid4().hex[:6]}"
    stash = f"/root/.cache/stash-{name}"  # a cache mount of its own: no other build's leftovers
    steps = "\n".join([
        "steps:",
        "  - name: fetch",
        "    secrets: [HF_TOKEN]",
        f"    cache: [{stash}]",
        f"    run: cp /run/secrets/HF_TOKEN {stash}/token",
        "  - name: install",
        f"    cache: [{stash}]",
        f"    run: mkdir -p /opt/app && cp {stash}/token /opt/app/config"])
    write_image(workspace, name, steps_spec(uuid.uuid4().hex, steps), {"build.sh": BUILD, "src/x": "x\n"})
    assert run_cli(["lock", name], workspace).returncode == 0
    proc = run_cli(["image", name], workspace, env={"HF_TOKEN": SENTINEL})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "install wrote a secret into its layers: HF_TOKEN in /opt/app/config" in proc.stderr
    assert docker("image", "inspect", f"enginebuild/{name}:latest", check=False).returncode != 0
    scan("the refusal", proc.stderr, SENTINEL)


PACKED = {
    "gzip": "gzip -c /run/secrets/HF_TOKEN > /opt/probe/t.gz",
    "tar.gz": "mkdir -p /tmp/p && cp /run/secrets/HF_TOKEN /tmp/p/t && tar -czf /opt/probe/bundle.tgz -C /tmp p",
    "base64-of-gzip-printed": "gzip -c /run/secrets/HF_TOKEN | base64 > /opt/probe/t.gz.b64 && "
                              "base64 /run/secrets/HF_TOKEN && cp /opt/probe/t.gz.b64 /dev/null",
}


@pytest.mark.parametrize("how", ["gzip", "tar.gz"])
def test_a_secret_written_compressed_is_found_inside(how, workspace, docker_engine, debian_reachable):
    script = "#!/bin/sh\nset -eu\nmkdir -p /opt/probe\n" + PACKED[how] + "\n"
    name = f"packed-{uuid.uuid4().hex[:6]}"
    write_image(workspace, name, spec(uuid.uuid4().hex), {"build.sh": script, "src/x": "x\n"})
    assert run_cli(["lock", name], workspace).returncode == 0
    proc = run_cli(["image", name], workspace, env={"HF_TOKEN": SENTINEL})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "component probe wrote a secret into its layers: HF_TOKEN in /opt/probe/" in proc.stderr
    report.count("secret scan", "leaks refused")


def test_the_base64_of_a_secret_printed_by_a_build_is_redacted_on_screen_and_in_logs(workspace, docker_engine,
                                                                                    debian_reachable, eb_home):
    script = "#!/bin/sh\nset -eu\nmkdir -p /opt/probe\necho \"b64: $(base64 /run/secrets/HF_TOKEN)\"\n"
    name = f"b64-{uuid.uuid4().hex[:6]}"
    write_image(workspace, name, spec(uuid.uuid4().hex), {"build.sh": script, "src/x": "x\n"})
    assert run_cli(["lock", name], workspace).returncode == 0
    proc = run_cli(["image", name, "-v"], workspace, env={"HF_TOKEN": SENTINEL})
    assert proc.returncode == 0, proc.stderr
    assert "b64: [redacted]" in proc.stderr
    encoded = base64.b64encode(SENTINEL.encode()).decode()[:-4]
    scan("enginebuild's output (base64)", proc.stdout + proc.stderr, encoded)
    for path in (Path(eb_home) / "logs").iterdir():
        scan(str(path), path.read_bytes(), encoded)


PLAIN = "#!/bin/sh\nset -eu\nmkdir -p /opt/probe\necho ok > /opt/probe/done\n"


def test_push_without_the_secret_trusts_only_layers_that_were_searched_for_it(workspace, docker_engine,
                                                                              debian_reachable, registry):
    name = f"unset-{uuid.uuid4().hex[:6]}"
    write_image(workspace, name, spec(uuid.uuid4().hex), {"build.sh": PLAIN, "src/x": "x\n"})
    assert run_cli(["lock", name], workspace).returncode == 0
    assert run_cli(["image", name], workspace, env={"HF_TOKEN": ""}).returncode == 0  # built without the value
    target = f"{registry.host}/enginebuild-test/{name}"
    refused = run_cli(["push", name, "--to", target], workspace, env={"HF_TOKEN": ""})
    assert refused.returncode == 1
    assert "never searched for secret HF_TOKEN" in refused.stderr and "nothing was pushed" in refused.stderr
    assert not (workspace / f"lockfiles/{name}.pushes.json").exists()
    with_value = run_cli(["push", name, "--to", target], workspace, env={"HF_TOKEN": SENTINEL})
    assert with_value.returncode == 0, with_value.stderr  # searched now, and recorded
    again = run_cli(["push", name, "--to", target, "--tag", "again"], workspace, env={"HF_TOKEN": ""})
    assert again.returncode == 0, again.stderr


def test_a_killed_build_leaves_no_file_holding_the_secret(workspace, docker_engine, debian_reachable, eb_home):
    import tempfile

    name = f"killed-{uuid.uuid4().hex[:6]}"
    write_image(workspace, name, spec(uuid.uuid4().hex), {"build.sh": BUILD + "sleep 5\n", "src/x": "x\n"})
    assert run_cli(["lock", name], workspace).returncode == 0
    proc = run_cli(["image", name], workspace, env={"HF_TOKEN": SENTINEL, "ENGINEBUILD_FAULT": "buildkit.running=kill"})
    assert proc.returncode not in (0, 1, 2)
    places = [*Path(tempfile.gettempdir()).glob(".enginebuild*"), Path(eb_home) / "tmp"]  # where temporaries go
    for folder in places:
        for path in [folder, *folder.rglob("*")]:
            try:
                if path.is_file() and not path.is_symlink() and path.stat().st_size < 1 << 20:
                    scan(str(path), path.read_bytes(), SENTINEL)
            except OSError:
                continue


# -- a secret as a name, in the config, or carried by a cache into an image that does not declare it --------

NAMED = {
    "file name": 'mkdir -p /opt/probe && touch "/opt/probe/$(cat /run/secrets/HF_TOKEN)"',
    "folder name": 'mkdir -p "/opt/probe/$(cat /run/secrets/HF_TOKEN)/x"',
    "symlink target": 'mkdir -p /opt/probe && ln -s "/srv/$(cat /run/secrets/HF_TOKEN)" /opt/probe/link',
}


@pytest.mark.parametrize("how", sorted(NAMED))
def test_a_secret_written_as_a_name_or_a_link_target_is_refused(how, workspace, docker_engine, debian_reachable):
    name = f"named-{uuid.uuid4().hex[:6]}"
    script = "#!/bin/sh\nset -eu\n" + NAMED[how] + "\n"
    write_image(workspace, name, spec(uuid.uuid4().hex), {"build.sh": script, "src/x": "x\n"})
    assert run_cli(["lock", name], workspace).returncode == 0
    proc = run_cli(["image", name], workspace, env={"HF_TOKEN": SENTINEL})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "component probe wrote a secret into its layers: HF_TOKEN in /opt/probe/" in proc.stderr, proc.stderr
    assert ("(its link target)" if how == "symlink target" else "[redacted]") in proc.stderr
    scan("the refusal", proc.stderr, SENTINEL)
    assert docker("image", "inspect", f"enginebuild/{name}:latest", check=False).returncode != 0


@pytest.mark.parametrize("where", ["labels[leak]", "env.LEAK"])
def test_a_secret_in_a_label_or_env_value_is_refused_before_anything_is_built(where, workspace, docker_engine,
                                                                             debian_reachable):
    name = f"config-{uuid.uuid4().hex[:6]}"
    write_image(workspace, name, spec(uuid.uuid4().hex), {"build.sh": PLAIN, "src/x": "x\n"})
    assert run_cli(["lock", name], workspace).returncode == 0
    plain = "correct-horse-battery-" + uuid.uuid4().hex[:8]  # a secret no token-shape lint would spot
    proc = run_cli(["image", name, "--set", f"{where}=v-{plain}"], workspace, env={"HF_TOKEN": plain})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    key = "Labels.leak" if where.startswith("labels") else "Env["
    assert "the image's config holds a secret's value: HF_TOKEN in config." + key in proc.stderr, proc.stderr
    plan = json.loads(run_cli(["plan", name, "--json", "--set", f"{where}=v-{plain}"], workspace).stdout)["images"]
    assert {c["action"] for doc in plan for c in doc["components"]} == {"build"}  # the refusal came first
    scan("the refusal", proc.stdout + proc.stderr, plain)
    assert docker("image", "inspect", f"enginebuild/{name}:latest", check=False).returncode != 0


def test_a_cache_mount_never_carries_a_secret_into_an_image_that_does_not_declare_it(workspace, docker_engine,
                                                                                     debian_reachable):
    stash = f"/root/.cache/shared-{uuid.uuid4().hex[:8]}"
    writer, reader = f"writer-{uuid.uuid4().hex[:6]}", f"reader-{uuid.uuid4().hex[:6]}"
    leaves = "\n".join(["steps:", "  - name: stash", "    secrets: [HF_TOKEN]", f"    cache: [{stash}]",
                        f"    run: cp /run/secrets/HF_TOKEN {stash}/token"])
    takes = "\n".join(["steps:", "  - name: take", f"    cache: [{stash}]",
                       f"    run: mkdir -p /opt/app && (cat {stash}/token || echo none) > /opt/app/config"])
    write_image(workspace, writer, steps_spec(uuid.uuid4().hex, leaves), {"build.sh": PLAIN, "src/x": "x\n"})
    reader_spec = spec(uuid.uuid4().hex).replace(", secrets: [HF_TOKEN]", "") + "\n" + takes
    write_image(workspace, reader, reader_spec, {"build.sh": PLAIN, "src/x": "x\n"})
    for image in (writer, reader):
        assert run_cli(["lock", image], workspace).returncode == 0
    first = run_cli(["image", writer], workspace, env={"HF_TOKEN": SENTINEL})
    assert first.returncode == 0, first.stderr  # the cache holds it; the writer's layers do not
    second = run_cli(["image", reader], workspace)
    assert second.returncode == 0, second.stderr
    assert read_file(f"enginebuild/{reader}:latest", "/opt/app/config") == b"none\n"  # not the writer's cache
    for image in (writer, reader):
        docker("image", "rm", f"enginebuild/{image}:latest", check=False)
