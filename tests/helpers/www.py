"""A real HTTP server on 127.0.0.1 serving a folder (URL sources, keyrings, archives)."""
from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path


class Server:
    """A real HTTP server on 127.0.0.1 serving a folder."""

    def __init__(self, folder: Path):
        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
