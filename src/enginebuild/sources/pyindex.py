"""A client for Python package indexes (PEP 503 HTML and PEP 691 JSON simple API).

The same protocol serves PyPI, PyTorch's and FlashInfer's indexes and a test index on
127.0.0.1, so a file pinned by name and sha256 can always be found again by name.
"""

from __future__ import annotations

import html.parser
import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from enginebuild.errors import ResolveError
from enginebuild.io.http import Http, HttpFailure
from enginebuild.wire import loads

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str
    size: int | None
    yanked: bool


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str, bool]] = []
        self._href: str | None = None
        self._yanked = False
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            values = dict(attrs)
            self._href, self._yanked, self._text = values.get("href"), "data-yanked" in values, ""

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, self._text.strip(), self._yanked))
            self._href = None


def simple_url(index: str) -> str:
    """An index given as a host (`https://pypi.org`) or its simple API (`.../simple`)."""
    index = index.rstrip("/")
    return index if urlsplit(index).path.rstrip("/") else index + "/simple"


def project_files(http: Http, index: str, name: str) -> list[IndexFile]:
    url = f"{simple_url(index)}/{canonicalize_name(name)}/"
    try:
        response = http.request("GET", url, headers={"Accept": f"{JSON_TYPE}, text/html;q=0.1"})
    except HttpFailure as exc:
        raise ResolveError(f"package index {index}: {exc}", hint=exc.hint) from None
    if response.status_code == 404:
        raise ResolveError(f"the index {index} has no project named {name!r}")
    if response.status_code != 200:
        raise ResolveError(f"the index {index} answered HTTP {response.status_code} for {url}")
    base = response.url or url
    out = []
    if response.headers.get("Content-Type", "").startswith(JSON_TYPE):
        for entry in loads(response.content).get("files", []):
            sha = (entry.get("hashes") or {}).get("sha256")
            if sha:
                out.append(IndexFile(entry["filename"], urljoin(base, entry["url"]), sha, entry.get("size"),
                                     bool(entry.get("yanked"))))
        return out
    parser = _Links()
    parser.feed(response.text)
    for href, text, yanked in parser.links:
        full = urljoin(base, href)
        file_url, _, fragment = full.partition("#")
        match = re.search(r"sha256=([0-9a-f]{64})", fragment)
        if match:
            name_part = text or file_url.rsplit("/", 1)[-1]
            out.append(IndexFile(name_part, file_url, match.group(1), None, yanked))
    return out


def version_of_file(project: str, filename: str) -> str | None:
    stem = canonicalize_name(project).replace("-", "_")
    for suffix in (".tar.gz", ".zip", ".tar.bz2", ".tgz"):
        if filename.endswith(suffix):
            base = filename[: -len(suffix)]
            name, _, version = base.rpartition("-")
            return version if canonicalize_name(name).replace("-", "_") == stem else None
    if filename.endswith(".whl"):
        parts = filename.split("-")
        return parts[1] if len(parts) >= 5 else None
    return None


def newest_version(files: list[IndexFile], project: str) -> str | None:
    versions = []
    for f in files:
        text = version_of_file(project, f.filename)
        try:
            if text and not f.yanked:
                version = Version(text)
                if not version.is_prerelease:
                    versions.append(version)
        except InvalidVersion:
            continue
    return str(max(versions)) if versions else None


def find_file(http: Http, index: str, project: str, filename: str, sha256: str) -> list[str]:
    """URLs where the index serves exactly this file (same name and sha256)."""
    try:
        files = project_files(http, index, project)
    except ResolveError:
        return []
    return [f.url for f in files if f.filename == filename and f.sha256 == sha256]
