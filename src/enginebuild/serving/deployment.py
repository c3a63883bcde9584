"""A deployment lock: what a cluster serves, pinned as the image lock pins what an image is made of.

    {"format": 1,
     "image": "REGISTRY/REPO@sha256:…",            the image, by digest
     "model": {"path": "/models/qwen",             the folder every node mounts (the same path on each)
               "repository": "Qwen/…", "revision": "<40 hex>",   where a hub snapshot's path names them
               "files": {"config.json": {"size": 1234, "sha256": "…"}, …}},
     "env": {"CTX_SIZE": "4096", …},               the launcher's settings, the same on every node
     "secrets": ["HF_TOKEN"],                      passed by name from the starting shell, never written
     "nodes": [{"name": "spark1", "address": "192.168.100.10", "role": "head"}, …],
     "answers": [{"prompt": "…", "max_tokens": 16, "expected": "…"}]}

`serve lock` writes it (JSON, keys sorted: a diff reads as what changed) from what a start would
use, hashing the model on the head node, and records the answers of the running cluster to its
prompts (greedy: temperature 0); answers may be written by hand. `serve up --locked FILE` takes
everything from it and refuses what differs, naming it. The file is read as YAML (JSON is a part
of YAML), so an error names its file, line and key.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.core.schema import Int, ListOf, MapOf, Record, Str
from enginebuild.core.yamlload import load_yaml_file
from enginebuild.errors import SpecError, UserError, Where
from enginebuild.io.files import write_atomic
from enginebuild.wire import JsonDoc

FORMAT = 1
DIGEST_REF = r"[A-Za-z0-9._:/-]+@sha256:[0-9a-f]{64}"
MAX_FILES = 100_000
MAX_ANSWERS = 256
_FILE = Record({"size": Int(minimum=0), "sha256": Str(pattern=r"[0-9a-f]{64}", what="a sha256 (64 hex digits)")},
               required=("size", "sha256"), doc="{size, sha256}")
_PATH = r"(?!/)(?!.*(?:^|/)\.\.?(?:/|$))[^\x00\n]{1,1024}"  # relative, no `.` or `..` part
SCHEMA = Record({
    "format": Int(minimum=FORMAT, maximum=FORMAT),
    "image": Str(pattern=DIGEST_REF, what="an image by digest: REGISTRY/REPO@sha256:DIGEST"),
    "model": Record({"path": Str(pattern=r"/(?!.*(?:^|/)\.\.?(?:/|$))[^\x00\n:]{0,4095}",
                                 what="an absolute path without . or .. parts (the same on every node)"),
                     "repository": Str(pattern=r"[A-Za-z0-9._-]+/[A-Za-z0-9._-]+", what="a hub repository ORG/NAME"),
                     "revision": Str(pattern=r"[0-9a-f]{40}", what="a 40-hex revision"),
                     "files": MapOf(_FILE, key_pattern=_PATH, key_what="a path relative to the model's folder",
                                    max_items=MAX_FILES)},
                    required=("path", "files"), doc="{path, repository, revision, files}"),
    "env": MapOf(Str(pattern=r"[^\x00\n\r]*", what="a value of one line", allow_int=True),
                 key_pattern=r"[A-Za-z_][A-Za-z0-9_]*", key_what="a variable name", max_items=256),
    "secrets": ListOf(Str(pattern=r"[A-Za-z_][A-Za-z0-9_]*", what="a variable name"), unique=True, max_items=16),
    "nodes": ListOf(Record({"name": Str(pattern=r"[a-z0-9][a-z0-9._-]{0,62}", what="a node name"),
                            "address": Str(pattern=r"[0-9A-Fa-f.:]{2,45}", what="an IP address"),
                            "role": Str(pattern=r"head|worker", what="head or worker")},
                           required=("name", "address", "role"), doc="{name, address, role}"), max_items=64),
    "answers": ListOf(Record({"prompt": Str(pattern=r"(?s).{1,65536}", what="a prompt (at most 64 KiB)"),
                              "max_tokens": Int(minimum=1, maximum=4096),
                              "expected": Str(pattern=r"(?s).{0,262144}", what="the expected text")},
                             required=("prompt", "max_tokens", "expected"), doc="{prompt, max_tokens, expected}"),
                      max_items=MAX_ANSWERS)},
    required=("format", "image", "nodes"), doc="a deployment lock")


@dataclass(frozen=True)
class ModelPin:
    path: str
    files: dict[str, tuple[int, str]]  # relative path: (size, sha256)
    repository: str = ""
    revision: str = ""


@dataclass(frozen=True)
class Answer:
    prompt: str
    max_tokens: int
    expected: str


@dataclass(frozen=True)
class Deployment:
    image: str
    nodes: tuple[tuple[str, str, str], ...]  # (name, address, role), the head first
    model: ModelPin | None = None
    env: dict[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    answers: tuple[Answer, ...] = ()


def hub_names(path: str) -> tuple[str, str]:
    """(repository, revision) where the folder is a hub cache's snapshot
    (`…/models--ORG--NAME/snapshots/<40 hex>`), else empty strings."""
    found = re.search(r"/models--([A-Za-z0-9._-]+)--([A-Za-z0-9._-]+)/snapshots/([0-9a-f]{40})/?$", path)
    return (f"{found.group(1)}/{found.group(2)}", found.group(3)) if found else ("", "")


def to_json(lock: Deployment) -> str:
    doc: JsonDoc = {"format": FORMAT, "image": lock.image,
                           "nodes": [{"name": n, "address": a, "role": r} for n, a, r in lock.nodes]}
    if lock.model is not None:
        model: JsonDoc = {"path": lock.model.path, "files": {
            p: {"size": s, "sha256": h} for p, (s, h) in sorted(lock.model.files.items())}}
        if lock.model.repository:
            model.update(repository=lock.model.repository, revision=lock.model.revision)
        doc["model"] = model
    if lock.env:
        doc["env"] = dict(sorted(lock.env.items()))
    if lock.secrets:
        doc["secrets"] = sorted(lock.secrets)
    if lock.answers:
        doc["answers"] = [{"prompt": a.prompt, "max_tokens": a.max_tokens, "expected": a.expected}
                          for a in lock.answers]
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write(path: Path, lock: Deployment) -> None:
    """Replaced whole or not at all."""
    write_atomic(path, to_json(lock).encode())


def read(path: Path) -> Deployment:
    display = str(path)
    if not path.is_file():
        raise UserError(f"{display}: no such deployment lock", hint="`serve lock IMAGE --out FILE` writes one")
    tree = load_yaml_file(path.resolve(), display, root=path.resolve().parent)
    SCHEMA.check(tree, "", getattr(tree, "where", None) or Where(display), partial=False)
    nodes = tuple((str(n["name"]), str(n["address"]), str(n["role"])) for n in tree["nodes"])
    if not nodes or nodes[0][2] != "head" or any(r != "worker" for _, _, r in nodes[1:]):
        raise SpecError(Where(display), "nodes", "the first node is the head, every other a worker")
    model = None
    if tree.get("model") is not None:
        m = tree["model"]
        files = {str(p): (int(f["size"]), str(f["sha256"])) for p, f in (m.get("files") or {}).items()}
        model = ModelPin(str(m["path"]), files, str(m.get("repository") or ""), str(m.get("revision") or ""))
    env = {str(k): str(v) for k, v in (tree.get("env") or {}).items()}
    answers = tuple(Answer(str(a["prompt"]), int(a["max_tokens"]), str(a["expected"]))
                    for a in tree.get("answers") or ())
    return Deployment(str(tree["image"]), nodes, model, env, tuple(str(s) for s in tree.get("secrets") or ()),
                      answers)


def differences(lock: Deployment, asked: Deployment) -> list[str]:
    """What a start would use that the lock does not hold, one line each (the answers aside)."""
    out = []
    if asked.image != lock.image:
        out.append(f"image: the lock has {lock.image}, this start {asked.image}")
    if asked.nodes != lock.nodes:
        out.append(f"nodes: the lock has {_nodes(lock.nodes)}; this start {_nodes(asked.nodes)}")
    locked_path = lock.model.path if lock.model else None
    asked_path = asked.model.path if asked.model else None
    if locked_path != asked_path:
        out.append(f"model: the lock has {locked_path or 'none'}, this start {asked_path or 'none'}")
    for key in sorted(set(lock.env) | set(asked.env)):
        if lock.env.get(key) != asked.env.get(key):
            have = f"{key}={lock.env[key]}" if key in lock.env else f"no {key}"
            want = f"{key}={asked.env[key]}" if key in asked.env else f"no {key}"
            out.append(f"env: the lock has {have}, this start {want}")
    if sorted(asked.secrets) != sorted(lock.secrets):
        out.append(f"secrets: the lock names {', '.join(sorted(lock.secrets)) or 'none'}, this shell has "
                   f"{', '.join(sorted(asked.secrets)) or 'none'}")
    return out


def _nodes(nodes: tuple[tuple[str, str, str], ...]) -> str:
    return ", ".join(f"{name}={address} ({role})" for name, address, role in nodes)


def file_differences(wanted: dict[str, tuple[int, str]], found: dict[str, tuple[int, str]]) -> list[str]:
    """The model's files that differ from the lock's, one line each (a file the lock does not list
    is named too: what the engine reads is every file of the folder)."""
    out = []
    for path in sorted(set(wanted) | set(found)):
        if path not in found:
            out.append(f"{path}: missing")
        elif path not in wanted:
            out.append(f"{path}: not in the lock")
        elif found[path] != wanted[path]:
            size, sha = found[path]
            out.append(f"{path}: sha256 {sha[:12]}… ({size} bytes) where the lock has {wanted[path][1][:12]}… "
                       f"({wanted[path][0]} bytes)")
    return out
