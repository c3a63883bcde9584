"""A real PEP 503 simple index on 127.0.0.1, serving wheels that tests make themselves."""
from __future__ import annotations

import base64
import hashlib
import html
import re
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from helpers.registry import free_port


def make_wheel(folder: Path, name: str, version: str, requires: tuple = (), files: dict | None = None) -> Path:
    """A valid pure-Python wheel: a module (or `files`, text or bytes), METADATA, WHEEL and a RECORD
    with hashes."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    contents = dict(files or {f"{dist}/__init__.py": f"VERSION = {version!r}\n"})
    contents[f"{dist}-{version}.dist-info/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires))
    contents[f"{dist}-{version}.dist-info/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: enginebuild-tests\n"
                                                     "Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = []
    for arcname, text in contents.items():
        data = text if isinstance(text, bytes) else text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arcname},sha256={digest},{len(data)}")
    record.append(f"{dist}-{version}.dist-info/RECORD,,")
    contents[f"{dist}-{version}.dist-info/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(path, "w") as archive:
        for arcname, text in contents.items():
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            archive.writestr(info, text)
    return path


class Index:
    """Serves FOLDER/files/* and a simple API at /simple/<project>/ (HTML, PEP 503). With
    `ranges`, a GET with `Range: bytes=A-B` gets those bytes (206), as PyPI's file host answers;
    without, the whole file (200), as a server that ignores Range does. `ranged` counts the 206s."""

    def __init__(self, folder: Path, ranges: bool = True):
        self.folder = folder
        (folder / "files").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.ranged = 0
        index = self

        class Quiet(SimpleHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                wanted = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
                path = Path(self.translate_path(self.path))
                if not (ranges and wanted and path.is_file()):
                    super().do_GET()
                    return
                data = path.read_bytes()
                start, end = int(wanted.group(1)), min(int(wanted.group(2)), len(data) - 1)
                index.ranged += 1
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                self.send_header("Content-Length", str(end - start + 1))
                self.end_headers()
                self.wfile.write(data[start:end + 1])

        handler = partial(Quiet, directory=str(folder))
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/simple"

    def add(self, project: str, wheel: Path) -> str:
        target = self.folder / "files" / wheel.name
        target.write_bytes(wheel.read_bytes())
        sha = hashlib.sha256(target.read_bytes()).hexdigest()
        page = self.folder / "simple" / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        links = page.read_text().split("\n") if page.exists() else []
        links = [line for line in links if line.startswith("<a ")]
        links.append(f'<a href="../../files/{html.escape(wheel.name)}#sha256={sha}">{html.escape(wheel.name)}</a>')
        page.write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
        return sha

    def file_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/files/{name}"

    def stop(self) -> None:
        self.server.shutdown()
