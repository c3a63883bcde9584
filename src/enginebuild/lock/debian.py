"""System packages pinned from Debian-style archives: exact version, file and sha256.

Each archive's InRelease is verified with gpgv: against the system's Debian/Ubuntu keyrings,
or against the archive's own keyring, whose signing key must have the fingerprint the spec
pins. Each Packages index must match the sha256 InRelease lists. A flat archive (NVIDIA's
CUDA repository) keeps InRelease and Packages in one folder. Archives are searched in the
order the spec lists them; dependencies are followed across all of them.
"""

from __future__ import annotations

import base64
import difflib
import gzip
import lzma
import os
import re
import tempfile
from collections.abc import Iterator
from functools import cmp_to_key
from pathlib import Path

from enginebuild.errors import ResolveError
from enginebuild.io import proc
from enginebuild.io.http import Http, HttpFailure
from enginebuild.io.store import sha256_bytes
from enginebuild.lock.pins import DebPin
from enginebuild.recipe.model import Archive

KEYRINGS = ("/usr/share/keyrings/debian-archive-keyring.gpg", "/usr/share/keyrings/ubuntu-archive-keyring.gpg")
Fields = dict[str, str]


def parse_paragraphs(text: str) -> Iterator[Fields]:
    for para in text.split("\n\n"):
        fields: Fields = {}
        key = None
        for line in para.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields:
            yield fields


def _order(c: str) -> int:
    if c == "~":
        return -1
    if c.isdigit():
        return 0
    if c.isalpha():
        return ord(c)
    return ord(c) + 256


def _compare_part(a: str, b: str) -> int:
    while a or b:
        na = re.match(r"\D*", a).group()  # type: ignore[union-attr]
        nb = re.match(r"\D*", b).group()  # type: ignore[union-attr]
        for i in range(max(len(na), len(nb))):
            ca = _order(na[i]) if i < len(na) else 0
            cb = _order(nb[i]) if i < len(nb) else 0
            if ca != cb:
                return -1 if ca < cb else 1
        a, b = a[len(na):], b[len(nb):]
        da = re.match(r"\d*", a).group()  # type: ignore[union-attr]
        db = re.match(r"\d*", b).group()  # type: ignore[union-attr]
        ia, ib = int(da or 0), int(db or 0)
        if ia != ib:
            return -1 if ia < ib else 1
        a, b = a[len(da):], b[len(db):]
    return 0


def compare_versions(a: str, b: str) -> int:
    """Debian version comparison (epoch, upstream, revision): -1, 0 or 1."""
    def split(v: str) -> tuple[int, str, str]:
        epoch, _, rest = v.rpartition(":") if ":" in v else ("0", "", v)
        upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "0")
        return int(epoch or 0), upstream, revision

    ea, ua, ra = split(a)
    eb, ub, rb = split(b)
    if ea != eb:
        return -1 if ea < eb else 1
    return _compare_part(ua, ub) or _compare_part(ra, rb)


def _index_hashes(inrelease: str) -> dict[str, str]:
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


def dearmor(data: bytes) -> bytes | None:
    """The binary form of an ASCII-armoured OpenPGP key block (RFC 4880, section 6.2), or None
    when `data` is not armoured (already binary)."""
    text = data.decode("ascii", "replace")
    begin = text.find("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    if begin < 0:
        return None
    lines = text[begin:].splitlines()[1:]
    while lines and lines[0].strip():  # armour headers end at the first empty line
        lines = lines[1:]
    body = []
    for line in lines[1:]:
        line = line.strip()
        if line.startswith("-----END") or line.startswith("="):
            break
        body.append(line)
    try:
        return base64.b64decode("".join(body), validate=True)
    except ValueError:
        raise ResolveError("a keyring is ASCII-armoured but its body is not valid base64") from None


def verify_signature(inrelease: bytes, keyring: Path | None, fingerprint: str | None) -> bool | None:
    """True when gpgv accepts InRelease (and, with a pinned fingerprint, the signer is that key);
    None when no keyring is available here to check it with."""
    keyrings = [str(keyring)] if keyring else [k for k in KEYRINGS if os.path.exists(k)]
    if not keyrings:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        handle = Path(scratch) / "InRelease"
        handle.write_bytes(inrelease)
        args = ["gpgv", "--status-fd", "1"]
        for i, k in enumerate(keyrings):
            binary = dearmor(Path(k).read_bytes())
            if binary is not None:  # gpgv reads binary keyrings only
                k = str(Path(scratch) / f"keyring-{i}.gpg")
                Path(k).write_bytes(binary)
            args += ["--keyring", k]
        try:
            result = proc.run(args + [str(handle)], check=False)
        except Exception:  # gpgv missing: say we could not check, never that it verified
            return None
    if result.returncode != 0:
        return False
    if fingerprint:
        signers = set()
        for line in result.out.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "VALIDSIG":
                signers.add(parts[2])
                signers.add(parts[-1])
        return fingerprint in signers
    return True


class DebianArchive:
    def __init__(self, http: Http, archive: Archive, arch: str, keyring: Path | None):
        self.http, self.archive, self.arch, self.keyring = http, archive, arch, keyring
        self.packages: dict[str, Fields] = {}  # the newest version of each name
        self.versions: dict[str, dict[str, Fields]] = {}  # every version the indexes list
        self.provides: dict[str, list[str]] = {}
        self.signature: bool | None = None

    @property
    def base(self) -> str:
        """The URL Filename fields are relative to."""
        a = self.archive
        return f"{a.url}/{a.suite.strip('/')}".rstrip("/") if a.flat else a.url

    def _get(self, url: str) -> bytes:
        try:
            response = self.http.request("GET", url)
        except HttpFailure as exc:
            raise ResolveError(f"Debian archive: {exc}", hint=exc.hint) from None
        if response.status_code != 200:
            raise ResolveError(f"Debian archive answered HTTP {response.status_code} for {url}")
        return bytes(response.content)

    def load(self) -> None:
        a = self.archive
        release_dir = self.base if a.flat else f"{a.url}/dists/{a.suite}"
        inrelease = self._get(f"{release_dir}/InRelease")
        self.signature = verify_signature(inrelease, self.keyring, a.fingerprint)
        if self.signature is False:
            who = f" by the key {a.fingerprint}" if a.fingerprint else ""
            raise ResolveError(f"the signature on {release_dir}/InRelease does not verify{who}")
        if a.keyring and self.signature is None:
            raise ResolveError(f"cannot check {release_dir}/InRelease against its pinned keyring (is gpgv installed?)")
        hashes = _index_hashes(inrelease.decode("utf-8", "replace"))
        indexes = ["Packages.xz", "Packages.gz"] if a.flat else \
            [f"{c}/binary-{self.arch}/Packages.xz" for c in a.components]
        for rel in indexes:
            if a.flat and rel not in hashes:
                continue
            data = self._get(f"{release_dir}/{rel}")
            if hashes.get(rel) != sha256_bytes(data):
                raise ResolveError(f"{release_dir}/{rel} does not match the sha256 in InRelease")
            text = (lzma.decompress(data) if rel.endswith(".xz") else gzip.decompress(data)).decode("utf-8", "replace")
            self._add(text)
            if a.flat:
                break

    def _add(self, text: str) -> None:
        for fields in parse_paragraphs(text):
            name = fields.get("Package")
            arch = fields.get("Architecture", self.arch)
            if not name or arch not in (self.arch, "all"):
                continue
            self.versions.setdefault(name, {})[fields.get("Version", "0")] = fields
            current = self.packages.get(name)
            if current is None or compare_versions(fields.get("Version", "0"), current.get("Version", "0")) > 0:
                self.packages[name] = fields
            for provided in _names(fields.get("Provides", "")):
                self.provides.setdefault(provided, []).append(name)


class ArchiveSet:
    """Several archives, searched in order."""

    def __init__(self, archives: list[DebianArchive]):
        self.archives = archives
        self.pinned: dict[str, str] = {}  # name -> the version a request names (NAME=VERSION)

    def find(self, name: str) -> tuple[int, Fields] | None:
        version = self.pinned.get(name)
        for i, archive in enumerate(self.archives):
            if version is not None:
                if version in archive.versions.get(name, {}):
                    return i, archive.versions[name][version]
            elif name in archive.packages:
                return i, archive.packages[name]
        return None

    def _split(self, requested: tuple[str, ...]) -> tuple[str, ...]:
        """Plain names, with each NAME=VERSION remembered; a version no archive lists is refused
        naming those it has."""
        names = []
        for item in requested:
            name, _, version = item.partition("=")
            names.append(name)
            if not version:
                continue
            self.pinned[name] = version
            if self.find(name) is None:
                have = sorted({v for a in self.archives for v in a.versions.get(name, {})},
                              key=cmp_to_key(compare_versions))
                where = ", ".join(a.archive.label for a in self.archives)
                raise ResolveError(f"no version {version} of {name!r} in {where} ({self.archives[0].arch}); "
                                   + (f"it has {', '.join(have)}" if have else "it has no such package"),
                                   hint=f"pin one of the versions listed ({name}={have[-1]})" if have else None)
        return tuple(names)

    def _pick(self, alternatives: list[str]) -> str | None:
        for name in alternatives:
            if self.find(name):
                return name
        for name in alternatives:
            for archive in self.archives:
                if name in archive.provides:
                    return sorted(archive.provides[name])[0]
        return None

    def assumed_present(self) -> set[str]:
        """What every dpkg-based system has: essential and required packages and their closure."""
        core = tuple(n for n, f in self.archives[0].packages.items()
                     if f.get("Essential") == "yes" or f.get("Priority") == "required")
        return set(self._walk(core, set()))

    def closure(self, requested: tuple[str, ...], *, skip_required: bool, installed: dict[str, str] | None = None,
                upgrade: bool = False) -> list[DebPin]:
        requested = self._split(requested)
        missing = [n for n in requested if not self.find(n)]
        if missing:
            where = ", ".join(a.archive.label for a in self.archives)

            close = difflib.get_close_matches(missing[0], {n for a in self.archives for n in a.packages}, n=1)
            raise ResolveError(f"no package {missing[0]!r} in {where} ({self.archives[0].arch})",
                               hint=f"did you mean {close[0]}? (the archive was read: the spec names a package it "
                                    "lacks)" if close else "the archive was read: the spec names a package it lacks")
        skip = (self.assumed_present() - set(requested)) if skip_required else set()
        wanted = list(requested)
        if upgrade and installed:
            for name, version in sorted(installed.items()):
                found = self.find(name)
                if found and compare_versions(found[1]["Version"], version) > 0:
                    wanted.append(name)
                    skip.discard(name)
        chosen = self._walk(tuple(wanted), skip)
        out = []
        for name in sorted(chosen):
            index, f = self.find(name)  # type: ignore[misc]
            out.append(DebPin(name, f["Version"], f.get("Architecture", self.archives[index].arch), f["Filename"],
                              f["SHA256"], int(f.get("Size", 0)), index))
        return out

    def _walk(self, requested: tuple[str, ...], skip: set[str]) -> dict[str, Fields]:
        chosen: dict[str, Fields] = {}
        todo = list(requested)
        while todo:
            name = todo.pop()
            if name in chosen or name in skip:
                continue
            found = self.find(name)
            if found is None:
                continue
            fields = found[1]
            chosen[name] = fields
            for key in ("Pre-Depends", "Depends"):
                for group in fields.get(key, "").split(","):
                    alternatives = _names(group.replace("|", ","))
                    if not alternatives or any(a in chosen or a in skip for a in alternatives):
                        continue
                    picked = self._pick(alternatives)
                    if picked is None:
                        raise ResolveError(f"{name} depends on {group.strip()}, which no archive of the spec has")
                    todo.append(picked)
        return chosen


def _names(text: str) -> list[str]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if part:
            out.append(re.split(r"[\s(:]", part, maxsplit=1)[0])
    return out


def installed_packages(status: bytes) -> dict[str, str]:
    """name -> version of what a dpkg status file says is installed."""
    out = {}
    for fields in parse_paragraphs(status.decode("utf-8", "replace")):
        if fields.get("Status", "").endswith(" installed") and fields.get("Package"):
            out[fields["Package"]] = fields.get("Version", "")
    return out
