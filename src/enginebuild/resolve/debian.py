"""System packages pinned from a Debian-style archive: exact version, file and sha256.

The archive's InRelease lists the sha256 of each Packages index; the index we read
must match it (and InRelease is checked with gpgv when a keyring is installed). For an
image built FROM scratch the whole dependency closure is pinned; on a base that has
dpkg, essential and required packages (and what they depend on) are assumed present.
"""
from __future__ import annotations

import lzma
import os
import re
import shutil
import subprocess
import tempfile

from enginebuild.errors import ResolveError
from enginebuild.http import Http, HttpFailure
from enginebuild.store import sha256_bytes

KEYRINGS = ("/usr/share/keyrings/debian-archive-keyring.gpg", "/usr/share/keyrings/ubuntu-archive-keyring.gpg")


def parse_paragraphs(text: str):
    for para in text.split("\n\n"):
        fields: dict = {}
        key = None
        for line in para.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields:
            yield fields


def _index_hashes(inrelease: str) -> dict:
    hashes, in_sha = {}, False
    for line in inrelease.splitlines():
        if line.startswith("SHA256:"):
            in_sha = True
            continue
        if in_sha and line.startswith(" "):
            parts = line.split()
            if len(parts) == 3:
                hashes[parts[2]] = parts[0]
        elif in_sha:
            in_sha = False
    return hashes


def _verify_signature(inrelease: bytes) -> bool | None:
    """True if gpgv accepts InRelease, None when no keyring or gpgv is installed."""
    keyrings = [k for k in KEYRINGS if os.path.exists(k)]
    if not keyrings or not shutil.which("gpgv"):
        return None
    with tempfile.NamedTemporaryFile(suffix=".InRelease") as handle:
        handle.write(inrelease)
        handle.flush()
        args = ["gpgv"]
        for k in keyrings:
            args += ["--keyring", k]
        proc = subprocess.run(args + [handle.name], capture_output=True, check=False)
    return proc.returncode == 0


class DebianArchive:
    def __init__(self, http: Http, url: str, suite: str, components: tuple, arch: str):
        self.http, self.url, self.suite, self.components, self.arch = http, url.rstrip("/"), suite, components, arch
        self.packages: dict = {}
        self.provides: dict = {}
        self.signature: bool | None = None

    def _get(self, path: str) -> bytes:
        url = f"{self.url}/{path}"
        try:
            response = self.http.request("GET", url)
        except HttpFailure as exc:
            raise ResolveError(f"Debian archive: {exc}") from None
        if response.status_code != 200:
            raise ResolveError(f"Debian archive answered HTTP {response.status_code} for {url}")
        return response.content

    def load(self) -> None:
        inrelease = self._get(f"dists/{self.suite}/InRelease")
        self.signature = _verify_signature(inrelease)
        if self.signature is False:
            raise ResolveError(f"the signature on {self.url}/dists/{self.suite}/InRelease does not verify")
        hashes = _index_hashes(inrelease.decode("utf-8", "replace"))
        for component in self.components:
            rel = f"{component}/binary-{self.arch}/Packages.xz"
            data = self._get(f"dists/{self.suite}/{rel}")
            if hashes.get(rel) != sha256_bytes(data):
                raise ResolveError(f"{rel} of {self.suite} does not match the sha256 in InRelease")
            for fields in parse_paragraphs(lzma.decompress(data).decode("utf-8", "replace")):
                name = fields.get("Package")
                if not name or name in self.packages:
                    continue
                self.packages[name] = fields
                for provided in _names(fields.get("Provides", "")):
                    self.provides.setdefault(provided, []).append(name)

    def _pick(self, alternatives: list) -> str | None:
        for name in alternatives:
            if name in self.packages:
                return name
        for name in alternatives:
            if name in self.provides:
                return sorted(self.provides[name])[0]
        return None

    def assumed_present(self) -> set:
        """What every dpkg-based system has: essential and required packages and their closure."""
        core = tuple(n for n, f in self.packages.items()
                     if f.get("Essential") == "yes" or f.get("Priority") == "required")
        return set(self._walk(core, set()))

    def closure(self, requested: tuple, *, skip_required: bool) -> list:
        for name in requested:
            if name not in self.packages:
                raise ResolveError(f"no package {name!r} in {self.url} {self.suite} ({self.arch})")
        skip = (self.assumed_present() - set(requested)) if skip_required else set()
        chosen = self._walk(tuple(requested), skip)
        return [
            {"name": n, "version": f["Version"], "arch": f.get("Architecture", self.arch),
             "filename": f["Filename"], "sha256": f["SHA256"], "size": int(f.get("Size", 0))}
            for n, f in sorted(chosen.items())
        ]

    def _walk(self, requested: tuple, skip: set) -> dict:
        chosen: dict = {}
        todo = list(requested)
        while todo:
            name = todo.pop()
            if name in chosen or name in skip:
                continue
            fields = self.packages[name]
            chosen[name] = fields
            for field in ("Pre-Depends", "Depends"):
                for group in fields.get(field, "").split(","):
                    alternatives = _names(group.replace("|", ","))
                    if not alternatives or any(a in chosen or a in skip for a in alternatives):
                        continue
                    picked = self._pick(alternatives)
                    if picked is None:
                        raise ResolveError(f"{name} depends on {group.strip()}, which {self.suite} does not have")
                    todo.append(picked)
        return chosen


def _names(text: str) -> list:
    out = []
    for part in text.split(","):
        part = part.strip()
        if part:
            out.append(re.split(r"[\s(:]", part, maxsplit=1)[0])
    return out
