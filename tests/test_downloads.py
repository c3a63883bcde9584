"""A cold build downloads several files at once (one stream rarely fills the link), and a
failed download stops the build naming the file. Real parts: an HTTP server on 127.0.0.1 that
holds each answer until a second request is in flight (or five seconds pass), counting how
many it served at once; the Docker engine for the build."""
import hashlib
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from helpers.inprocess import run_in_process
from helpers.registry import free_port
from helpers.specs import write_image


class Rendezvous:
    """Serves four files of its own (new bytes each time, so no store has them yet). An answer
    waits until another request is being served (at most `patience` seconds; none once two were
    served at once), so a client that fetches one file at a time is measurably serial: `most`
    stays 1."""

    def __init__(self, patience: float = 5.0):
        salt = uuid.uuid4().bytes
        self.files = {f"/w{n}.bin": salt + bytes([n]) * (256 * 1024) for n in range(4)}
        self.lock = threading.Condition()
        self.in_flight = self.most = 0
        self.missing: set[str] = set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = outer.files.get(self.path)
                if body is None or self.path in outer.missing:
                    self.send_error(404)
                    return
                with outer.lock:
                    outer.in_flight += 1
                    outer.most = max(outer.most, outer.in_flight)
                    outer.lock.notify_all()
                    # once two were open at once, that is shown: the rest need not wait
                    outer.lock.wait_for(lambda: outer.in_flight >= 2 or outer.most >= 2, timeout=patience)
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                finally:
                    with outer.lock:
                        outer.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"


@pytest.fixture
def rendezvous():
    server = Rendezvous()
    yield server
    server.server.shutdown()


def spec(server: Rendezvous) -> str:
    files = "".join(f'  /opt{path}: {{url: "{server.url(path)}", sha256: {hashlib.sha256(body).hexdigest()}}}\n'
                    for path, body in server.files.items())
    return f"base: scratch\nplatform: linux/amd64\nfiles:\n{files}"


def test_a_cold_build_downloads_several_files_at_once(workspace, rendezvous, docker_engine):
    write_image(workspace, "dl", spec(rendezvous))
    assert run_in_process(["lock", "dl"], workspace).returncode == 0
    rendezvous.most = 0
    proc = run_in_process(["image", "dl"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert rendezvous.most >= 2  # one at a time would never have two answers open


def test_fetch_downloads_several_files_at_once_and_a_missing_one_fails_naming_it(workspace, rendezvous):
    write_image(workspace, "dl", spec(rendezvous))
    assert run_in_process(["lock", "dl"], workspace).returncode == 0
    rendezvous.missing = {"/w2.bin"}
    rendezvous.most = 0
    proc = run_in_process(["fetch", "dl"], workspace)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "w2.bin" in proc.stderr and "404" in proc.stderr, proc.stderr
    rendezvous.missing = set()
    proc = run_in_process(["fetch", "dl"], workspace)
    assert proc.returncode == 0, proc.stderr
    assert rendezvous.most >= 2
