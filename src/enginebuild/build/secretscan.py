"""Catching a secret written into a layer before anything can be tagged, recorded or pushed.

Searched, in every file of the layers a build with secrets added (streamed, never all in
memory): each secret's value as written, base64 (at all three alignments, standard and
URL-safe), URL-encoded and JSON-escaped; and well-known credential formats. A secret's
value or an unambiguous credential (a Hugging Face token file, a registry auth file, a
GitHub token, an AWS key) is refused, naming the secret or rule and the paths, never the
value; an ambiguous pattern is a warning. `secret-scan.allow` in the spec lists
exceptions, each with a reason.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import re
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from enginebuild.errors import SecretLeak
from enginebuild.io.progress import output

CHUNK = 1 << 20


@dataclass(frozen=True)
class Rule:
    name: str
    path: str  # glob of the path inside the image ("*" for any)
    content: re.Pattern[bytes]
    refuse: bool  # unambiguous: refuse; otherwise warn


RULES = (
    Rule("huggingface-token-file", "*huggingface/token", re.compile(rb"hf_[A-Za-z0-9]{30,}"), True),
    Rule("huggingface-token", "*", re.compile(rb"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{34,40}(?![A-Za-z0-9])"), False),
    Rule("registry-auth-file", "*.docker/config.json", re.compile(rb'"auth"\s*:\s*"[A-Za-z0-9+/=]{8,}"'), True),
    Rule("registry-auth", "*config.json", re.compile(rb'"auths"\s*:\s*\{[^}]*"auth"\s*:\s*"[A-Za-z0-9+/=]{8,}"'),
         False),
    Rule("github-token", "*", re.compile(rb"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{36}(?![A-Za-z0-9])"), True),
    Rule("github-pat", "*", re.compile(rb"github_pat_[A-Za-z0-9_]{60,}"), True),
    Rule("aws-access-key", "*", re.compile(rb"(?<![A-Z0-9])AKIA[0-9A-Z]{16}(?![A-Z0-9])"), False),
    Rule("aws-credentials-file", "*.aws/credentials", re.compile(rb"aws_secret_access_key\s*="), True),
)


def encodings(value: str) -> list[bytes]:
    """The ways a tool might store a value: as is, base64 (any alignment), URL- and JSON-escaped."""
    raw = value.encode()
    out = {raw, quote(value, safe="").encode(), json.dumps(value)[1:-1].encode()}
    for k in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * k + raw).rstrip(b"=")
            start = (4 * k + 2) // 3 if k else 0
            stop = len(text) - 1 if len(text) > start + 8 else len(text)
            middle = text[start:stop]
            if len(middle) >= 8:
                out.add(middle)
    return sorted((e for e in out if len(e) >= 6), key=len, reverse=True)


@dataclass
class Finding:
    what: str  # a secret's name or a rule's
    path: str
    refuse: bool


def _scan_stream(handle: IO[bytes], needles: dict[bytes, str], rules: list[Rule], path: str) -> list[Finding]:
    found: dict[str, Finding] = {}
    keep = max([len(n) for n in needles] + [128]) - 1
    tail = b""
    active = [r for r in rules if fnmatch.fnmatchcase("/" + path, r.path) or r.path == "*"]
    while block := handle.read(CHUNK):
        window = tail + block
        for needle, name in needles.items():
            if name not in found and needle in window:
                found[name] = Finding(name, path, True)
        for rule in active:
            if rule.name not in found and rule.content.search(window):
                found[rule.name] = Finding(rule.name, path, rule.refuse)
        tail = window[-keep:]
    return list(found.values())


RULES_ID = hashlib.sha256(repr([(r.name, r.path, r.content.pattern, r.refuse) for r in RULES]).encode()).hexdigest()


def _scan_tar(tar_path: Path, needles: dict[bytes, str], rules: list[Rule]) -> list[Finding]:
    findings = []
    with tarfile.open(tar_path, "r:") as tar:
        for member in tar:
            if not member.isreg() or member.size == 0:
                continue
            handle = tar.extractfile(member)
            assert handle is not None
            findings += _scan_stream(handle, needles, rules, member.name)
    return findings


@dataclass
class Scanner:
    spec: Any  # ImageSpec: its secret-scan allow-list
    warned: set[str] = field(default_factory=set)
    store: Any = None  # with a Store, the credential rules' verdict on a stored layer is kept per layer

    def _rule_key(self, tar_path: Path) -> str | None:
        """The record key of a stored layer's rule verdict (layers are named by their sha256)."""
        if self.store is None or Path(tar_path) != self.store.path(Path(tar_path).name):
            return None
        return hashlib.sha256(f"{Path(tar_path).name}:{RULES_ID}".encode()).hexdigest()

    def allowed(self, finding: Finding) -> bool:
        return any(fnmatch.fnmatchcase("/" + finding.path.lstrip("/"), "/" + a.path.lstrip("/"))
                   and a.rule == finding.what for a in getattr(self.spec, "scan_allow", ()))

    def scan_tars(self, tars: Iterable[Path], secrets: dict[str, str]) -> list[Finding]:
        needles = {e: name for name, value in secrets.items() if len(value) >= 6 for e in encodings(value)}
        findings = []
        names = {r.name for r in RULES}
        for tar_path in tars:
            key = self._rule_key(tar_path)
            kept = self.store.record("secret-scan", key) if key else None
            if kept is None:
                found = _scan_tar(tar_path, needles, list(RULES))
                if key:
                    self.store.put_record("secret-scan", key, {"findings": [
                        {"what": f.what, "path": f.path, "refuse": f.refuse} for f in found if f.what in names]})
            else:  # the rules already read this layer: only the secrets' values are searched
                found = _scan_tar(tar_path, needles, []) if needles else []
                found += [Finding(str(f["what"]), str(f["path"]), bool(f["refuse"])) for f in kept["findings"]]
            findings += found
        return [f for f in findings if not self.allowed(f)]

    def judge(self, findings: list[Finding], what: str) -> None:
        refused = [f for f in findings if f.refuse]
        for f in findings:
            if not f.refuse and (f.what, f.path) not in self.warned:
                self.warned.add((f.what, f.path))  # type: ignore[arg-type]
                output().say(f"  warning: {what}: /{f.path} looks like a credential ({f.what}); if it is not one, "
                             "allow it in secret-scan.allow with a reason")
        if refused:
            by_what: dict[str, list[str]] = {}
            for f in refused:
                by_what.setdefault(f.what, []).append("/" + f.path.lstrip("/"))
            named = "; ".join(f"{w} in {', '.join(sorted(set(p))[:5])}" for w, p in sorted(by_what.items()))
            raise SecretLeak(f"{what} wrote a secret into its layers: {named}; nothing was tagged, recorded or "
                             "pushed", hint="read secrets from /run/secrets/NAME at build time and never copy them "
                                            "into the image (or its caches); for a false positive, see "
                                            "secret-scan.allow in docs/spec.md")

    def check_files(self, tars: Iterable[Path], secrets: dict[str, str], what: str) -> None:
        self.judge(self.scan_tars(tars, secrets), what)

    def check_image(self, engine: Any, tag: str, parents: list[Any], secrets: dict[str, str], what: str) -> None:
        from enginebuild.build.layers import cut_new_layers, remove_folder, scratch_folder
        from enginebuild.io.store import Store
        from enginebuild.settings import settings

        folder = scratch_folder(Store(settings().home))
        try:
            raws = cut_new_layers(engine, tag, {layer.size: 1 for layer in parents}, len(parents), folder)
            self.check_files(raws, secrets, what)
        finally:
            remove_folder(folder)


def iter_members(paths: Iterable[Path]) -> Iterator[str]:
    for path in paths:
        with tarfile.open(path, "r:") as tar:
            for member in tar:
                yield member.name
