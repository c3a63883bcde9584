"""What users see during long work, in non-terminal mode (CI logs): a slow download prints
periodic lines with bytes, percentage, rate and ETA; a build that prints `[n/N]` shows it on its
live line with an ETA from the last build of that component; `doctor` names each missing part
with a fix and exits 1."""
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from helpers.docker import docker
from helpers.inprocess import run_in_process
from helpers.registry import free_port
from helpers.specs import BUSYBOX_BUILDER, write_image

CHUNKS, CHUNK, PAUSE = 12, 128 * 1024, 0.12
PLAIN = {"CI": "true", "ENGINEBUILD_PROGRESS_EVERY": "0.1"}


@pytest.fixture
def slow_server():
    """A real HTTP server that sends a 1.5 MB file in 12 chunks, 0.12 s apart."""
    body = bytes(range(256)) * (CHUNKS * CHUNK // 256)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for i in range(CHUNKS):
                self.wfile.write(body[i * CHUNK:(i + 1) * CHUNK])
                self.wfile.flush()
                time.sleep(PAUSE)

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/weights.bin", hashlib.sha256(body).hexdigest()
    server.shutdown()


def test_a_slow_download_prints_periodic_progress_lines_with_percent_rate_and_eta(workspace, slow_server):
    url, sha = slow_server
    write_image(workspace, "t", f"""
        base: scratch
        platform: linux/amd64
        files:
          /opt/weights.bin: {{url: "{url}", sha256: {sha}}}
        """)
    assert run_in_process(["lock", "t"], workspace).returncode == 0
    proc = run_in_process(["fetch", "t"], workspace, env=PLAIN)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "downloading" in line]
    partial = [line for line in lines if "%" in line and "ETA" in line]
    assert len(partial) >= 3, lines  # the server takes 1.4 s at least; a line every 0.1 s at most
    assert all(" of 1.6 MB (" in line and "/s, ETA " in line for line in partial)
    assert lines[-1].endswith("s") and "1.6 MB in " in lines[-1]  # the closing line
    quiet = run_in_process(["--quiet", "fetch", "t"], workspace, env=PLAIN)
    assert quiet.stderr == ""


COUNTING = BUSYBOX_BUILDER + """components:
  counted:
    source: {path: counted}
    build:
      script: counted/build.sh
      args: {RUN: first}
    outputs: {paths: [/out]}
install: [counted]
"""
STEPS = ('#!/bin/sh\nset -e\ni=1\nwhile [ "$i" -le 10 ]; do echo "[$i/10] compiling unit $i"; i=$((i + 1)); '
         'sleep 0.3; done\nmkdir -p /out && echo "$RUN" > /out/done\n')


@pytest.mark.docker
@pytest.mark.network
def test_a_build_shows_its_n_of_n_progress_and_an_eta_from_the_last_build(workspace, docker_engine,
                                                                          debian_reachable):
    write_image(workspace, "counted", COUNTING, {"counted/build.sh": STEPS, "counted/salt": str(time.time())})
    assert run_in_process(["lock", "counted"], workspace).returncode == 0
    first = run_in_process(["image", "counted"], workspace, env=PLAIN)
    assert first.returncode == 0, first.stderr
    live = [line for line in first.stderr.splitlines() if line.startswith("  [linux/amd64] component counted ")]
    assert any("/10]" in line and "| [" in line for line in live), live  # the step and the latest line
    again = run_in_process(["image", "counted", "--build-arg", "RUN=second"], workspace, env=PLAIN)
    assert again.returncode == 0, again.stderr
    live = [line for line in again.stderr.splitlines() if line.startswith("  [linux/amd64] component counted ")]
    with_eta = [line for line in live if "ETA" in line and "(from the last build)" in line]
    assert with_eta, live
    assert any("/10]" in line for line in with_eta)


def rows(proc) -> dict:
    return {c["name"]: c for c in json.loads(proc.stdout)["checks"]}


def test_doctor_passes_here_and_names_each_check(workspace, docker_engine):
    proc = run_in_process(["doctor", "--json"], workspace)
    checks = rows(proc)
    assert {"docker client", "docker engine", "BuildKit", "uv", "git", "disk: store"} <= set(checks)
    assert "platform linux/arm64" in checks  # the catalogue targets arm64
    assert proc.returncode == (0 if all(c["status"] != "FAIL" for c in checks.values()) else 1)


def test_doctor_with_a_missing_client_a_stopped_engine_and_an_unreachable_registry(workspace, tmp_path):
    env = {"ENGINEBUILD_DOCKER": str(tmp_path / "no-docker"), "DOCKER_HOST": f"unix://{tmp_path}/no.sock",
           "ENGINEBUILD_HTTP_BACKOFF": "0"}
    proc = run_in_process(["doctor", "--json", "--registry", "127.0.0.1:9/enginebuild/nowhere"], workspace, env=env)
    assert proc.returncode == 1
    checks = rows(proc)
    assert checks["docker client"]["status"] == "FAIL" and "does not run" in checks["docker client"]["detail"]
    assert checks["docker engine"]["status"] == "FAIL" and "nothing answers at unix://" in checks["docker engine"][
        "detail"]
    assert "start dockerd" in checks["docker engine"]["fix"]
    assert checks["BuildKit"]["status"] == "FAIL"
    registry = checks["registry 127.0.0.1:9"]
    assert registry["status"] == "FAIL" and "connection refused" in registry["detail"]
    text = run_in_process(["doctor", "--registry", "127.0.0.1:9/enginebuild/nowhere"], workspace, env=env)
    assert text.returncode == 1 and "fix: start dockerd" in text.stdout and "problem(s)" in text.stdout


def test_the_eta_says_unknown_rather_than_a_wrong_number():
    import io

    from enginebuild.io.progress import BuildLine, Output

    now = [0.0]
    out = Output(stream=io.StringIO(), live=False, clock=lambda: now[0])
    line = BuildLine(out, "[linux/amd64] component x", expected_s=20.0)
    now[0] = 5.0
    assert "ETA 15s (from the last build)" in line.line()
    now[0] = 30.0  # longer than last time: no "0s left"
    assert "ETA unknown (past the last build's 20s)" in line.line()
    fresh = BuildLine(out, "[linux/amd64] component y", expected_s=None)
    fresh.feed("#7 [2/3] RUN /opt/enginebuild/build.sh")  # BuildKit counting instructions: not progress
    now[0] = 40.0
    assert fresh.step is None and "ETA unknown" in fresh.line()
    fresh.feed("#7 12.5 [50/200] Building CXX object ggml.o")  # the build's own count
    now[0] = 60.0
    assert "[50/200]" in fresh.line() and "(from progress)" in fresh.line()


def screen(written: str) -> list[str]:
    """What a terminal shows after `written`, for the escapes Output uses (cursor up, clear line)."""
    rows, row, i = [""], 0, 0
    while i < len(written):
        if written.startswith("\x1b[1A", i):
            row, i = max(0, row - 1), i + 4
        elif written.startswith("\x1b[2K", i):
            rows[row], i = "", i + 4
        elif written[i] == "\n":
            row, i = row + 1, i + 1
            rows += [""] * (row + 1 - len(rows))
        else:
            rows[row], i = rows[row] + written[i], i + 1
    while rows and not rows[-1]:
        rows.pop()
    return rows


def test_on_a_terminal_two_builds_at_once_have_a_line_each_and_what_is_said_stays_above_them(monkeypatch):
    import io

    monkeypatch.setenv("COLUMNS", "151")  # the terminal's width, whatever runs the test (a worker's pipe)

    from enginebuild.io.progress import BuildLine, Output

    stream, now = io.StringIO(), [0.0]
    out = Output(stream=stream, live=True, clock=lambda: now[0])
    kernels = BuildLine(out, "[linux/amd64] component kernels", 20.0)
    engine = BuildLine(out, "[linux/amd64] component engine", None)
    for t, build, text in ((1, kernels, "#7 0.5 cc unit1.c [1/4]"), (2, engine, "#9 0.7 cc engine.c"),
                           (3, engine, "#9 sha256:cb3f00aa 1.2MB / 3.4MB 0.3s"), (4, kernels, "#7 3.5 cc unit2.c [2/4]")):
        now[0] = t
        build.feed(text)
    shown = screen(stream.getvalue())
    assert len(shown) == 2, shown  # one line per running build, not one line they take turns on
    assert shown[0].startswith("  [linux/amd64] component kernels 4s [2/4]") and shown[0].endswith("| cc unit2.c [2/4]")
    assert shown[1].startswith("  [linux/amd64] component engine 3s") and shown[1].endswith("| cc engine.c")
    out.say("  downloading a.deb: 2.5 MB in 0.1s")
    kernels.close()
    out.done("  [linux/amd64] component kernels: built in 4.0s")
    assert screen(stream.getvalue()) == ["  downloading a.deb: 2.5 MB in 0.1s",
                                         "  [linux/amd64] component kernels: built in 4.0s", shown[1]]
    engine.close()
    assert screen(stream.getvalue()) == ["  downloading a.deb: 2.5 MB in 0.1s",
                                         "  [linux/amd64] component kernels: built in 4.0s"]


def test_doctor_warns_of_a_gone_registry_that_only_an_old_push_record_names(workspace, docker_engine):
    record = {"pushes": [{"repository": "127.0.0.1:9/enginebuild/gone", "tag": "v1", "digest": "sha256:" + "0" * 64,
                          "platforms": {}, "pushed_at": "2026-01-01T00:00:00Z"}]}
    (workspace / "lockfiles/demo.pushes.json").write_text(json.dumps(record))
    env = {"ENGINEBUILD_HTTP_BACKOFF": "0"}
    proc = run_in_process(["doctor", "--json"], workspace, env=env)
    checks = rows(proc)
    gone = checks["registry 127.0.0.1:9"]
    assert gone["status"] == "warn" and "an earlier push's target" in gone["detail"], gone
    assert proc.returncode == (0 if all(c["status"] != "FAIL" for c in checks.values()) else 1)
    asked = run_in_process(["doctor", "--json", "--registry", "127.0.0.1:9/enginebuild/gone"], workspace, env=env)
    assert rows(asked)["registry 127.0.0.1:9"]["status"] == "FAIL" and asked.returncode == 1  # asked about: it counts


@pytest.mark.docker
@pytest.mark.network
def test_plain_progress_shows_every_build_steps_output_saying_whose_it_is(tmp_path, docker_engine, debian_reachable):
    """As Docker's --progress=plain: the builder's output, each line naming the image, platform and
    component or layer (two builds' counters never read as one); -q shows none of it."""
    import uuid

    ws = tmp_path / "repo"
    (ws / "lockfiles").mkdir(parents=True)
    name, mark = f"plain-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    write_image(ws, name, BUSYBOX_BUILDER + "components:\n  e:\n    source: {path: src}\n    build: {script: build.sh}\n"
                "    outputs: {paths: [/x]}\ninstall: [e]\n",
                {"src/a": "a\n", "build.sh": f"#!/bin/sh\necho compiling-{mark}\necho built > /x\n"})
    assert run_in_process(["lock", name], ws).returncode == 0
    plain = run_in_process(["image", name, "--progress=plain"], ws)
    assert plain.returncode == 0, plain.stderr
    line = next((x for x in plain.stderr.splitlines() if f"compiling-{mark}" in x), None)
    assert line is not None, plain.stderr
    assert line.lstrip().startswith(f"{name} [linux/amd64] component e | ")
    assert "builder: BuildKit, driven by `" in plain.stderr  # the builder line says what it is
    quiet = run_in_process(["image", name, "--no-cache", "-q"], ws)
    assert quiet.returncode == 0 and f"compiling-{mark}" not in quiet.stderr + quiet.stdout
    docker("image", "rm", f"enginebuild/{name}:latest", check=False)
