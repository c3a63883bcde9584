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
import os
import re
import secrets as random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from enginebuild.errors import SecretLeak, SecretUnchecked
from enginebuild.execution.layers import cut_new_layers, remove_folder, scratch_folder
from enginebuild.execution.secretsearch import Finding, Rule, search_tar
from enginebuild.io.progress import output
from enginebuild.io.store import Store, is_sha256
from enginebuild.settings import settings

if TYPE_CHECKING:
    from enginebuild.io.store import Store
    from enginebuild.oci.engine import EngineApi
    from enginebuild.oci.image import Layer
    from enginebuild.recipe.model import ImageSpec

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


def needles_of(values: dict[str, str]) -> dict[bytes, str]:
    """Every encoding searched for (see `encodings`) of each secret's value, to the secret's name."""
    return {e: name for name, value in values.items() if len(value) >= 6 for e in encodings(value)}


RULES_ID = hashlib.sha256(repr([(r.name, r.path, r.content.pattern, r.refuse) for r in RULES]).encode()).hexdigest()


def secret_names(spec: ImageSpec) -> list[str]:
    """Every secret the spec declares, whichever step or component declares it."""
    return list(spec.secret_names)


def secret_values(names: Iterable[str]) -> dict[str, str]:
    """The values set here (the environment) of these secrets."""

    return {n: v for n in names if (v := os.environ.get(n, ""))}


@dataclass
class Scanner:
    """The scan of one build or push. Every layer of an image whose spec declares secrets is
    searched for every declared secret whose value is here, whatever step or component declared
    it (a value carried through a cache mount into another step is found too). A stored layer
    keeps the record of what it was searched for: each secret's name with a salted hash of the
    value (never the value), so a push without the value knows whether the layer was checked."""

    spec: ImageSpec  # its secrets and secret-scan allow-list
    warned: set[tuple[str, str]] = field(default_factory=set)
    store: Store | None = None  # with a store, verdicts are kept per stored layer

    @property
    def _kept(self) -> Store:
        """The store verdicts are kept in (asked only where one was given)."""
        assert self.store is not None, "a layer's verdict is kept only with a store"
        return self.store

    @property
    def declared(self) -> list[str]:
        return secret_names(self.spec)

    def values(self) -> dict[str, str]:
        return secret_values(self.declared)

    def _rule_key(self, tar_path: Path) -> str | None:
        """The record key of a stored layer's rule verdict (layers are named by their sha256)."""
        name = Path(tar_path).name
        if self.store is None or not is_sha256(name) or Path(tar_path) != self._kept.path(name):
            return None
        return hashlib.sha256(f"{Path(tar_path).name}:{RULES_ID}".encode()).hexdigest()

    def allowed(self, finding: Finding) -> bool:
        return any(fnmatch.fnmatchcase("/" + finding.path.lstrip("/"), "/" + a.path.lstrip("/"))
                   and a.rule == finding.what for a in getattr(self.spec, "scan_allow", ()))

    def scan_tars(self, tars: Iterable[Path], secrets: dict[str, str]) -> list[Finding]:
        needles = needles_of(secrets)
        findings = []
        names = {r.name for r in RULES}
        for tar_path in tars:
            key = self._rule_key(tar_path)
            kept = self._kept.record("secret-scan", key) if key else None
            if kept is None:
                found = search_tar(tar_path, needles, list(RULES))
                if key:
                    self._kept.put_record("secret-scan", key, {"findings": [
                        {"what": f.what, "path": f.path, "refuse": f.refuse} for f in found if f.what in names]})
            else:  # the rules already read this layer: only the secrets' values are searched
                found = search_tar(tar_path, needles, []) if needles else []
                found += [Finding(str(f["what"]), str(f["path"]), bool(f["refuse"])) for f in kept["findings"]]
            findings += found
        return [f for f in findings if not self.allowed(f)]

    def judge(self, findings: list[Finding], what: str) -> None:
        refused = [f for f in findings if f.refuse]
        for f in findings:
            if not f.refuse and (f.what, f.path) not in self.warned:
                self.warned.add((f.what, f.path))
                if f.what == "not-searched-inside":
                    output().say(f"  warning: {what}: /{f.path}: not searched inside for secrets")
                    continue
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

    def check_config(self, doc: object, what: str) -> None:
        """The image's config (labels, env, entrypoint, history …) holds no declared secret's value:
        a `--set labels[x]=…` or env default that carries one is refused, naming the key."""
        values = self.values() if self.declared else {}
        needles = needles_of(values)
        found = sorted({(needles[n], where.lstrip(".")) for where, text in _strings(doc, "")
                        for n in needles if n in text.encode("utf-8", "surrogateescape")})
        if found:
            named = "; ".join(f"{name} in {where}" for name, where in found[:5])
            raise SecretLeak(f"{what}: the image's config holds a secret's value: {named}; nothing was tagged, "
                             "recorded or pushed",
                             hint="a secret is read at build time from /run/secrets/NAME; labels and env are "
                                  "public parts of the image")

    # -- stored layers: what each was searched for --------------------------------------------
    def _salted(self, name: str, value: str) -> str:
        return hashlib.sha256(_salt(self._kept) + f"{name}\0{value}".encode()).hexdigest()

    def checked(self, sha: str) -> dict[str, str]:
        """The secrets (name -> salted hash) stored layer `sha` was searched for."""
        record = self._kept.record("secret-checked", sha) or {}
        return dict(record.get("secrets", {}))

    def check_layers(self, layers: list[tuple[str, str]], what: str, *, at_push: bool = False) -> None:
        """Every stored layer (sha, what made it) searched for every declared secret whose value is
        here, unless its record says it was, with this value. At push, a declared secret whose value
        is not here is taken on the record's word: a layer never searched for it is refused."""
        declared = self.declared
        if not declared or self.store is None:
            return
        values = self.values()
        salted = {n: self._salted(n, v) for n, v in values.items()}
        checked = {sha: self.checked(sha) for sha, _ in layers}  # each layer's record, read once
        todo = [sha for sha, _ in layers if any(checked[sha].get(n) != h for n, h in salted.items())]
        if todo and values:
            try:
                self.check_files([self._kept.path(sha) for sha in todo], values, what)
            except SecretLeak:
                self._drop_leaking(todo, values)
                raise
            for sha in todo:
                checked[sha] = {**checked[sha], **salted}
                self._kept.put_record("secret-checked", sha, {"secrets": checked[sha]})
        if not at_push:
            return
        for name in (n for n in declared if n not in values):
            never = [made for sha, made in layers if name not in checked[sha]]
            if never:
                raise SecretUnchecked(
                    f"{what}: {len(never)} layer(s) were never searched for secret {name} ({never[0]}"
                    f"{', ...' if len(never) > 1 else ''}), and {name} is not set here; nothing was pushed",
                    hint=f"set {name} for the push (its value is only searched for, never printed or sent), "
                         "or build the image with it set")

    def _drop_leaking(self, shas: list[str], values: dict[str, str]) -> None:
        """A stored layer that holds a secret is removed from the store: no file of enginebuild's
        keeps the value (the next build makes the layer again, and refuses it again)."""
        for sha in shas:
            if any(f.refuse for f in self.scan_tars([self._kept.path(sha)], values)):
                self._kept.path(sha).unlink(missing_ok=True)

    def check_image(self, engine: EngineApi, tag: str, parents: list[Layer], secrets: dict[str, str], what: str) -> None:
        folder = scratch_folder(Store(settings().home))
        try:
            raws = cut_new_layers(engine, tag, {layer.size: 1 for layer in parents}, len(parents), folder)
            self.check_files(raws, secrets, what)
        finally:
            remove_folder(folder)


def _salt(store: Store) -> bytes:
    """This machine's salt for the hashes of secret values (made once, kept in the store)."""

    record = store.record("secret-checked", "salt")
    if record is None:
        record = {"salt": random.token_hex(32)}
        store.put_record("secret-checked", "salt", record)
    return bytes.fromhex(str(record["salt"]))


def _strings(doc: object, where: str) -> Iterable[tuple[str, str]]:
    """Every string of a JSON document with its path (`config.Labels.x`, `config.Env[2]`), keys included."""
    if isinstance(doc, str):
        yield where, doc
    elif isinstance(doc, dict):
        for key, value in doc.items():
            yield f"{where} (a key)", str(key)
            yield from _strings(value, f"{where}.{key}")
    elif isinstance(doc, (list, tuple)):
        for i, value in enumerate(doc):
            yield from _strings(value, f"{where}[{i}]")

