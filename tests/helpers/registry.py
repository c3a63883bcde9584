"""Real registries for tests: the CNCF distribution registry, plain, and behind a real token service."""
from __future__ import annotations

import base64
import datetime as dt
import json
import secrets
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import requests


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Registry:
    host: str
    process: subprocess.Popen
    folder: Path
    extra: dict = field(default_factory=dict)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        for server in self.extra.get("servers", []):
            server.shutdown()


def _wait(url: str, process: subprocess.Popen, log: Path) -> None:
    for _ in range(100):
        if process.poll() is not None:
            raise RuntimeError(f"registry exited: {log.read_text()[-2000:]}")
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            time.sleep(0.1)
    raise RuntimeError(f"registry did not start: {log.read_text()[-2000:]}")


def _serve(folder: Path, auth_yaml: str = "") -> Registry:
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = folder / "config.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {folder / 'data'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n" + auth_yaml)
    log = folder / "registry.log"
    process = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=open(log, "w"),
                               stderr=subprocess.STDOUT)
    _wait(f"http://127.0.0.1:{port}/v2/", process, log)
    return Registry(f"127.0.0.1:{port}", process, folder)


def start_registry(folder: Path) -> Registry:
    return _serve(folder)


def start_htpasswd_registry(folder: Path, user: str, password: str) -> Registry:
    """A registry that wants Basic credentials (the htpasswd file is bcrypt, made with htpasswd)."""
    folder.mkdir(parents=True, exist_ok=True)
    htpasswd = folder / "htpasswd"
    line = subprocess.run(["htpasswd", "-Bbn", user, password], capture_output=True, text=True, check=True).stdout
    htpasswd.write_text(line.strip() + "\n")
    auth = f"auth:\n  htpasswd:\n    realm: enginebuild-test\n    path: {htpasswd}\n"
    return _serve(folder, auth)


# -- a token service that signs JWTs the registry verifies against our own CA certificate --------

def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _make_key_and_cert(folder: Path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "enginebuild test token issuer")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


class TokenService:
    """Issues registry tokens for exactly the scope asked, to users with the right password."""

    def __init__(self, folder: Path, service: str, users: dict):
        from cryptography.hazmat.primitives import serialization

        self.key, self.cert = _make_key_and_cert(folder)
        self.der = base64.b64encode(self.cert.public_bytes(serialization.Encoding.DER)).decode()
        self.service, self.users = service, users
        self.requests: list = []
        self.port = free_port()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                owner.handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def realm(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def shutdown(self):
        self.server.shutdown()

    def sign(self, claims: dict) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.der]}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def handle(self, handler: BaseHTTPRequestHandler):
        query = parse_qs(urlparse(handler.path).query)
        scope = (query.get("scope") or [""])[0]
        auth = handler.headers.get("Authorization", "")
        user = None
        if auth.startswith("Basic "):
            name, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            if self.users.get(name) == password:
                user = name
        self.requests.append({"scope": scope, "service": (query.get("service") or [""])[0], "user": user})
        if auth and user is None:
            handler.send_response(401)
            handler.end_headers()
            return
        access = []
        if scope:
            kind, name, actions = scope.split(":")
            allowed = actions.split(",") if user else [a for a in actions.split(",") if a == "pull"]
            access.append({"type": kind, "name": name, "actions": allowed})
        now = int(time.time())
        token = self.sign({"iss": "enginebuild-test-issuer", "sub": user or "", "aud": self.service,
                           "exp": now + 300, "nbf": now - 10, "iat": now, "jti": secrets.token_hex(8),
                           "access": access})
        body = json.dumps({"token": token, "expires_in": 300}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def start_token_registry(folder: Path, users: dict | None = None) -> Registry:
    service = "enginebuild-test-registry"
    tokens = TokenService(folder, service, users or {"tester": "s3cret-registry-password"})
    auth = ("auth:\n  token:\n"
            f"    realm: {tokens.realm}\n    service: {service}\n    issuer: enginebuild-test-issuer\n"
            f"    rootcertbundle: {folder / 'cert.pem'}\n")
    registry = _serve(folder, auth)
    registry.extra = {"servers": [tokens], "tokens": tokens}
    return registry


def push_blob_image(host: str, repository: str, tag: str, auth=None, salt: str = "") -> str:
    """Push a tiny image (one layer, one config) straight through the distribution API; returns its digest."""
    import gzip
    import hashlib
    import io
    import tarfile

    layer_tar = io.BytesIO()
    with tarfile.open(fileobj=layer_tar, mode="w") as tar:
        data = f"{repository}:{tag}{salt}\n".encode()
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    layer = gzip.compress(layer_tar.getvalue(), mtime=0)
    diff_id = "sha256:" + hashlib.sha256(layer_tar.getvalue()).hexdigest()
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": [diff_id]},
                         "config": {}}).encode()
    session = requests.Session()
    headers = {}
    if auth:
        headers["Authorization"] = auth
    for blob in (layer, config):
        digest = "sha256:" + hashlib.sha256(blob).hexdigest()
        start = session.post(f"http://{host}/v2/{repository}/blobs/uploads/", headers=headers)
        start.raise_for_status()
        location = start.headers["Location"]
        if location.startswith("/"):
            location = f"http://{host}{location}"
        sep = "&" if "?" in location else "?"
        put = session.put(f"{location}{sep}digest={digest}", data=blob,
                          headers={**headers, "Content-Type": "application/octet-stream"})
        put.raise_for_status()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": len(config),
                   "digest": "sha256:" + hashlib.sha256(config).hexdigest()},
        "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": len(layer),
                    "digest": "sha256:" + hashlib.sha256(layer).hexdigest()}],
    }).encode()
    put = session.put(f"http://{host}/v2/{repository}/manifests/{tag}", data=manifest,
                      headers={**headers, "Content-Type": "application/vnd.docker.distribution.manifest.v2+json"})
    put.raise_for_status()
    return put.headers["Docker-Content-Digest"]


def push_files_image(host: str, repository: str, tag: str, files: dict, architecture: str = "amd64",
                     env: list | None = None) -> str:
    """Push a one-layer image holding exactly `files` (path -> bytes), straight through the
    distribution API; returns the manifest digest."""
    import gzip
    import hashlib
    import io
    import tarfile

    layer_tar = io.BytesIO()
    with tarfile.open(fileobj=layer_tar, mode="w") as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    layer = gzip.compress(layer_tar.getvalue(), mtime=0)
    diff_id = "sha256:" + hashlib.sha256(layer_tar.getvalue()).hexdigest()
    config = json.dumps({"architecture": architecture, "os": "linux",
                         "rootfs": {"type": "layers", "diff_ids": [diff_id]},
                         "config": {"Env": env or ["PATH=/usr/local/bin:/usr/bin:/bin"]},
                         "history": [{"created_by": "test"}]}).encode()
    session = requests.Session()
    for blob in (layer, config):
        digest = "sha256:" + hashlib.sha256(blob).hexdigest()
        start = session.post(f"http://{host}/v2/{repository}/blobs/uploads/")
        start.raise_for_status()
        location = start.headers["Location"]
        if location.startswith("/"):
            location = f"http://{host}{location}"
        sep = "&" if "?" in location else "?"
        session.put(f"{location}{sep}digest={digest}", data=blob,
                    headers={"Content-Type": "application/octet-stream"}).raise_for_status()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": len(config),
                   "digest": "sha256:" + hashlib.sha256(config).hexdigest()},
        "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": len(layer),
                    "digest": "sha256:" + hashlib.sha256(layer).hexdigest()}],
    }).encode()
    put = session.put(f"http://{host}/v2/{repository}/manifests/{tag}", data=manifest,
                      headers={"Content-Type": "application/vnd.docker.distribution.manifest.v2+json"})
    put.raise_for_status()
    return put.headers["Docker-Content-Digest"]
