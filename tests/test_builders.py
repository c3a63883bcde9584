"""Builders: components spread over several Docker engines (each with its own data root, socket
and bridge), the image assembled here, identical to a one-engine build; a builder that dies
mid-build, or that cannot be reached, does not fail the build."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, need, run_cli
from helpers.docker import docker, read_file
from helpers.engines import start_engine, tls_files
from helpers.specs import BUSYBOX_BUILDER, write_image
from helpers.sshd import SSHD, free_port, path_with, start_sshd

pytestmark = [pytest.mark.docker]

# two components that need nothing of each other; `slow` sleeps long enough for a test to stop
# its engine while it runs (the test acts when the build announces it is running, not on a timer)
SPEC = BUSYBOX_BUILDER + """components:
  slow:
    source: {path: slow}
    build: {script: slow/build.sh}
    outputs: {paths: [/opt/parts/slow.txt]}
  quick:
    source: {path: quick}
    build: {script: quick/build.sh}
    outputs: {paths: [/opt/parts/quick.txt]}
install: [slow, quick]
"""
FILES = {"slow/build.sh": "#!/bin/sh\nset -e\nsleep SLEEP\nmkdir -p /opt/parts\necho 'slow part MARK' > /opt/parts/slow.txt\n",
         "quick/build.sh": "#!/bin/sh\nset -e\nmkdir -p /opt/parts\necho 'quick part MARK' > /opt/parts/quick.txt\n"}


def write(ws, mark: str, sleep: int = 0) -> None:
    files = {k: v.replace("MARK", mark).replace("SLEEP", str(sleep)) for k, v in FILES.items()}
    write_image(ws, "two", SPEC, files)


@pytest.fixture(scope="module")
def engines(docker_engine, tmp_path_factory):
    need(os.geteuid() == 0 and shutil.which("dockerd") is not None and shutil.which("ip") is not None,
         "extra Docker engines need root, dockerd and ip")
    started = []
    try:
        for index in (10, 11):
            started.append(start_engine(tmp_path_factory.mktemp(f"builder{index}"), index=index))
        yield started
    finally:
        for engine in started:
            engine.stop()


def builder_args(engines) -> list:
    return [a for n, e in zip(("b1", "b2"), engines, strict=True) for a in ("--builder", f"{n}={e.host}")]


def chains(engine) -> list:
    out = docker("-H", engine.host, "images", "--format", "{{.Repository}}:{{.Tag}}", "enginebuild/chain").stdout
    return out.split()


def test_two_components_go_to_two_builders_and_the_image_is_the_one_a_single_engine_makes(workspace, engines,
                                                                                          tmp_path):
    write(workspace, f"identity {time.time_ns()}")
    # one engine (this machine's), its own home: everything built here
    one = run_cli(["image", "two"], workspace, env={"ENGINEBUILD_HOME": str(tmp_path / "home1")})
    assert one.returncode == 0, one.stderr
    single = docker("image", "inspect", "--format", "{{.Id}}", "enginebuild/two:latest").stdout.strip()
    docker("rmi", "enginebuild/two:latest", check=False)

    env = {"ENGINEBUILD_HOME": str(tmp_path / "home2")}
    plan = json.loads(run_cli(["plan", "two", "--json", *builder_args(engines)], workspace, env=env).stdout)
    doc = plan["images"][0]
    chosen = {c["name"]: c["builder"] for c in doc["components"]}
    assert sorted(chosen) == ["quick", "slow"] and sorted(chosen.values()) == ["b1", "b2"], chosen
    assert [b["name"] for b in doc["builders"]] == ["b1", "b2"]
    assert all(b["platforms"] == ["linux/amd64"] for b in doc["builders"])  # read from each engine
    text = run_cli(["plan", "two", *builder_args(engines)], workspace, env=env).stdout
    assert "on builder b1" in text and "on builder b2" in text

    two = run_cli(["image", "two", *builder_args(engines)], workspace, env=env)
    assert two.returncode == 0, two.stderr
    out = two.stdout + two.stderr
    for name, builder in chosen.items():
        assert f"component {name}: built in" in out and f"component {name}: on builder {builder}" in out, out
    assert "built 2 component(s)" in two.stdout
    spread = docker("image", "inspect", "--format", "{{.Id}}", "enginebuild/two:latest").stdout.strip()
    assert spread == single  # the same image, wherever its parts were built
    # each builder was given the builder environment and built its component there
    keys = {c["name"]: c["key"] for c in doc["components"]}
    for name, builder in chosen.items():
        engine = engines[0] if builder == "b1" else engines[1]
        assert chains(engine), f"{engine.host} holds no builder environment: it built nothing"
        held = docker("-H", engine.host, "images", "--format", "{{.Tag}}", "enginebuild/component").stdout
        assert keys[name] in held.split(), (name, builder)
    # the image assembled here holds both parts
    assert read_file("enginebuild/two:latest", "/opt/parts/slow.txt").startswith(b"slow part identity")
    assert read_file("enginebuild/two:latest", "/opt/parts/quick.txt").startswith(b"quick part identity")


def test_an_unreachable_builder_is_named_and_skipped(workspace, engines, tmp_path):
    write(workspace, f"unreachable {time.time_ns()}")
    env = {"ENGINEBUILD_HOME": str(tmp_path / "home")}
    proc = run_cli(["image", "two", "--builder", f"b1={engines[0].host}", "--builder", "gone=tcp://127.0.0.1:9"],
                   workspace, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "builder gone (tcp://127.0.0.1:9): unreachable" in proc.stderr and "skipped" in proc.stderr
    assert "built 2 component(s)" in proc.stdout
    # with no builder answering, the build stops and says which were tried
    proc = run_cli(["image", "two", "--builder", "gone=tcp://127.0.0.1:9", "--builder", "lost=unix:///nowhere.sock"],
                   workspace, env={"ENGINEBUILD_HOME": str(tmp_path / "home3")})
    assert proc.returncode != 0
    assert "no builder answers: gone (tcp://127.0.0.1:9), lost (unix:///nowhere.sock)" in proc.stderr


def test_a_builder_that_dies_mid_build_has_its_component_built_on_another(workspace, tmp_path_factory, tmp_path):
    need(os.geteuid() == 0 and shutil.which("dockerd") is not None, "extra Docker engines need root and dockerd")
    doomed = start_engine(tmp_path_factory.mktemp("doomed"), index=12)
    survivor = start_engine(tmp_path_factory.mktemp("survivor"), index=13)
    try:
        # the window in which the test acts on the announcement (it polls every 0.1 s); the build
        # again on the survivor sleeps it too, so it is no longer than that needs
        write(workspace, f"dies {time.time_ns()}", sleep=12)
        home = tmp_path / "home"
        env = {"ENGINEBUILD_HOME": str(home), "ENGINEBUILD_FAULT": "buildkit.running:component slow=announce"}
        args = ["--builder", f"doomed={doomed.host}", "--builder", f"survivor={survivor.host}"]
        assert run_cli(["lock", "two"], workspace, env={"ENGINEBUILD_HOME": str(home)}).returncode == 0
        plan = json.loads(run_cli(["plan", "two", "--json", *args], workspace, env={"ENGINEBUILD_HOME": str(home)}).stdout)
        if {c["name"]: c["builder"] for c in plan["images"][0]["components"]}["slow"] != "doomed":
            args = args[2:] + args[:2]  # the builder listed first gets the first component
        child = subprocess.Popen([sys.executable, "-m", "enginebuild", "image", "two", *args], cwd=workspace,
                                 env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **env},
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        announced = home / "faults" / "buildkit.running"
        for _ in range(6000):  # the slow component's build is running (on `doomed`, as planned)
            if announced.exists() or child.poll() is not None:
                break
            time.sleep(0.1)
        assert announced.exists(), child.communicate()
        os.kill(doomed.process.pid, signal.SIGKILL)  # the machine is gone, as a power cut leaves it
        out, err = child.communicate(timeout=900)
        assert child.returncode == 0, err
        assert "builder doomed stopped answering while building component slow" in err, err
        assert "building it again on builder survivor" in err
        assert "component slow: built in" in out + err and "on builder survivor" in out + err
        assert read_file("enginebuild/two:latest", "/opt/parts/slow.txt").startswith(b"slow part dies")
    finally:
        doomed.stop()
        survivor.stop()


def test_builders_from_enginebuild_yaml_and_a_docker_context_checked_by_doctor(workspace, engines, tmp_path):
    write(workspace, f"configured {time.time_ns()}")
    config = tmp_path / "docker-config"
    env = {"ENGINEBUILD_HOME": str(tmp_path / "home"), "DOCKER_CONFIG": str(config)}
    made = subprocess.run(["docker", "context", "create", "second-spark", "--docker", f"host={engines[1].host}"],
                          env={**os.environ, "DOCKER_CONFIG": str(config)}, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    (workspace / "enginebuild.yaml").write_text(
        "builders:\n"
        f"  - name: first\n    host: {engines[0].host}\n"
        "  - name: second\n    context: second-spark\n"
        "  - name: gone\n    host: tcp://127.0.0.1:9\n    platforms: [linux/arm64]\n")
    proc = run_cli(["doctor", "--json"], workspace, env=env)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["builder first"]["status"] == "ok" and "builds linux/amd64 natively (read from the engine)" \
        in checks["builder first"]["detail"]
    assert checks["builder second"]["status"] == "ok"
    assert f"context second-spark ({engines[1].host})" in checks["builder second"]["detail"]
    assert checks["builder gone"]["status"] == "FAIL" and "tcp://127.0.0.1:9" in checks["builder gone"]["detail"]
    assert proc.returncode == 1  # a builder named there does not answer

    proc = run_cli(["image", "two"], workspace, env=env)  # the builders of enginebuild.yaml, no flag
    assert proc.returncode == 0, proc.stderr
    assert "builder gone (tcp://127.0.0.1:9): unreachable" in proc.stderr
    assert "component slow: on builder" in proc.stderr and "component quick: on builder" in proc.stderr
    assert {"first", "second"} == {line.rsplit(" ", 1)[1] for line in proc.stderr.splitlines()
                                   if ": on builder " in line}

    # a builder given an address and a context is refused, naming the file, line and key
    (workspace / "enginebuild.yaml").write_text(
        "builders:\n  - name: both\n    host: unix:///x.sock\n    context: second-spark\n")
    proc = run_cli(["image", "two"], workspace, env=env)
    assert proc.returncode == 2 and "enginebuild.yaml:4: builders[0]: give only one of host, context" in proc.stderr
    (workspace / "enginebuild.yaml").unlink()
    proc = run_cli(["image", "two", "--builder", "no-such-context"], workspace, env=env)
    assert proc.returncode == 2 and "--builder 'no-such-context': no Docker context of that name" in proc.stderr


def test_a_builder_reached_over_ssh_as_docker_reaches_it(workspace, engines, tmp_path):
    need(os.path.exists(SSHD) and shutil.which("ssh") is not None, "ssh and sshd are not installed (scripts/setup.sh)")
    server = start_sshd(tmp_path / "sshd", "spark2", engines[1].host)
    try:
        write(workspace, f"over ssh {time.time_ns()}")
        env = {"ENGINEBUILD_HOME": str(tmp_path / "home"), "PATH": path_with(server.bin_dir)}
        args = ["--builder", f"near={engines[0].host}", "--builder", "ssh://root@spark2"]
        proc = run_cli(["doctor", "--json", *args], workspace, env=env)
        check = next(c for c in json.loads(proc.stdout)["checks"] if c["name"] == "builder ssh://root@spark2")
        assert check["status"] == "ok" and "builds linux/amd64 natively" in check["detail"], check
        proc = run_cli(["image", "two", *args], workspace, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "on builder ssh://root@spark2" in proc.stderr, proc.stderr
        far = next(line for line in proc.stderr.splitlines() if ": on builder ssh://root@spark2" in line)
        name = far.split("component ", 1)[1].split(":", 1)[0]
        plan = json.loads(run_cli(["plan", "two", "--json"], workspace, env=env).stdout)["images"][0]
        key = next(c["key"] for c in plan["components"] if c["name"] == name)
        held = docker("-H", engines[1].host, "images", "--format", "{{.Tag}}", "enginebuild/component").stdout
        assert key in held.split()  # built by the far engine, driven over ssh
        assert read_file("enginebuild/two:latest", f"/opt/parts/{name}.txt").startswith(f"{name} part over ssh".encode())
    finally:
        server.stop()


def test_a_builder_over_tcp_with_tls_from_a_docker_context(workspace, engines, tmp_path, tmp_path_factory):
    need(shutil.which("openssl") is not None, "openssl is not installed")
    server, client = tls_files(tmp_path / "tls")
    port = free_port()
    secured = start_engine(tmp_path_factory.mktemp("tls-engine"), index=14, extra=(
        "-H", f"tcp://127.0.0.1:{port}", "--tlsverify", "--tlscacert", str(server / "ca.pem"),
        "--tlscert", str(server / "server-cert.pem"), "--tlskey", str(server / "server-key.pem")))
    try:
        config = tmp_path / "docker-config"
        made = subprocess.run(["docker", "context", "create", "secured", "--docker",
                               f"host=tcp://127.0.0.1:{port},ca={client / 'ca.pem'},cert={client / 'cert.pem'},"
                               f"key={client / 'key.pem'}"],
                              env={**os.environ, "DOCKER_CONFIG": str(config)}, capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        write(workspace, f"over tls {time.time_ns()}")
        env = {"ENGINEBUILD_HOME": str(tmp_path / "home"), "DOCKER_CONFIG": str(config)}
        proc = run_cli(["image", "two", "--builder", f"near={engines[0].host}", "--builder", "secured"],
                       workspace, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "on builder secured (context secured (tcp://127.0.0.1:" in proc.stderr and "with TLS)" in proc.stderr
        assert chains(secured), "the TLS engine built nothing"
        # without the client certificate the engine refuses: it is skipped, named
        plain = run_cli(["image", "two", "--builder", f"near={engines[0].host}", "--builder",
                         f"bare=tcp://127.0.0.1:{port}"], workspace, env={"ENGINEBUILD_HOME": str(tmp_path / "h2")})
        assert plain.returncode == 0 and f"builder bare (tcp://127.0.0.1:{port}): unreachable" in plain.stderr
        # a tcp:// address with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH: TLS for every call, as docker makes them
        tls_env = {"ENGINEBUILD_HOME": str(tmp_path / "h3"), "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(client)}
        doctor = run_cli(["doctor", "--json", "--builder", f"viaenv=tcp://127.0.0.1:{port}"], workspace, env=tls_env)
        check = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "builder viaenv")
        assert check["status"] == "ok" and f"tcp://127.0.0.1:{port} with TLS" in check["detail"], check
        write(workspace, f"over env tls {time.time_ns()}")
        viaenv = run_cli(["image", "two", "--builder", f"viaenv=tcp://127.0.0.1:{port}"], workspace, env=tls_env)
        assert viaenv.returncode == 0, viaenv.stderr
        assert "unreachable" not in viaenv.stderr
        assert f"on builder viaenv (tcp://127.0.0.1:{port} with TLS)" in viaenv.stderr, viaenv.stderr
        # a context with the CA alone (Docker accepts it): no client certificate sent, the engine refuses, named
        made = subprocess.run(["docker", "context", "create", "ca-only", "--docker",
                               f"host=tcp://127.0.0.1:{port},ca={client / 'ca.pem'}"],
                              env={**os.environ, "DOCKER_CONFIG": str(config)}, capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        ca_only = run_cli(["image", "two", "--builder", f"near={engines[0].host}", "--builder", "ca-only"],
                          workspace, env=env)
        assert ca_only.returncode == 0 and "builder ca-only (context ca-only" in ca_only.stderr, ca_only.stderr
        assert "unreachable (cannot reach the Docker engine at tcp://127.0.0.1:" in ca_only.stderr
        assert ": TLS: " in ca_only.stderr, ca_only.stderr  # said as TLS, not as an engine that does not answer
        # a client whose CA is another: the engine's certificate is not verified, and that is what is said
        _, stranger = tls_files(tmp_path / "other-tls")
        other_env = {**tls_env, "DOCKER_CERT_PATH": str(stranger)}
        doctor = run_cli(["doctor", "--json", "--builder", f"viaenv=tcp://127.0.0.1:{port}"], workspace, env=other_env)
        check = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "builder viaenv")
        assert check["status"] == "FAIL" and ": TLS: " in check["detail"] and "CERTIFICATE_VERIFY_FAILED" in \
            check["detail"], check
    finally:
        secured.stop()
