"""What a registry cache entry may say, checked before any of it is used.

An entry is read from a registry anyone with write access to the cache repository can write
to. Its signature (cachetrust.py) says who wrote it; this module says what shape it must have,
whoever wrote it: each digest 64 hex digits, each size a bounded integer, each blob a record
names one the entry itself carries (with the same size), each name a name (a wheel's file name,
a repository, a secret's), each line of text printable. A record that is not of its kind's
shape is refused as a whole, and the build makes what it described.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from enginebuild.io.store import is_sha256
from enginebuild.oci.push import COMPRESSIONS
from enginebuild.wire import JsonDoc, Parsed

# the kinds of entry, each named in its config (the kind a reader asks for must be the kind it gets)
LAYER = "layer"  # a command layer's blobs
OUTPUT = "component-output"  # a component's outputs, with their bytes
COMPILER_CACHE = "compiler-cache"  # a component's compiler-cache tars
SUBSTITUTE = "layer-substitute"  # a layer described without its bytes (substitutes.py)
DESCRIBED = "outputs-described"  # a component's outputs record, without its bytes
VERDICT = "image-verdict"  # the verdicts of the checks that read an image's bytes
FORMS = tuple(c.record for c in COMPRESSIONS.values())  # the store's record kinds of compressed forms

MAX_BLOB = 1 << 40  # bytes: no layer, output or cache of any engine comes near
MAX_ITEMS = 4096  # blobs, layers or wheels in one entry
MAX_TEXT = 400
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
WHEEL = re.compile(r"[A-Za-z0-9_.+!-]{1,200}\.whl")
_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}(?::[0-9]{1,5})?/" + _PART + r"(?:/" + _PART + r"){0,15}")
SECRET = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
CHECKS = ("kernels", "runtime")


class BadEntry(Exception):
    """An entry that is not of its kind's shape: why, in words."""


def _need(ok: bool, why: str) -> None:
    if not ok:
        raise BadEntry(why)


def size(value: Parsed, what: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_BLOB:
        raise BadEntry(f"{what}: not a size")
    return value


def sha(value: Parsed, what: str) -> str:
    _need(is_sha256(value), f"{what}: not a sha256")
    return str(value)


def text(value: Parsed, what: str, limit: int = MAX_TEXT) -> str:
    """A line a message may show: printable, bounded, no workflow command (`::`)."""
    if not isinstance(value, str) or len(value) > limit or not value.isprintable() or "::" in value:
        raise BadEntry(f"{what}: not a printable line")
    return value


def mapping(value: Parsed, what: str, most: int = MAX_ITEMS) -> JsonDoc:
    if not isinstance(value, dict) or len(value) > most:
        raise BadEntry(f"{what}: not a mapping")
    return dict(value)


def items(value: Parsed, what: str) -> list[Parsed]:
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise BadEntry(f"{what}: not a list")
    return list(value)


def triple(value: Parsed, what: str) -> list[Parsed]:
    if not isinstance(value, list) or len(value) != 3:
        raise BadEntry(what)
    return value


def pair(value: Parsed, what: str) -> tuple[str, int]:
    if not isinstance(value, list) or len(value) != 2:
        raise BadEntry(f"{what}: not a [sha256, size] pair")
    return sha(value[0], what), size(value[1], what)


def blobs_of(manifest: JsonDoc) -> dict[str, int]:
    """The blobs an entry's manifest carries: sha256 -> size (its descriptors checked)."""
    out: dict[str, int] = {}
    for i, layer in enumerate(items(manifest.get("layers", []), "layers")):
        digest = mapping(layer, f"layers[{i}]").get("digest")
        _need(isinstance(digest, str) and DIGEST.fullmatch(digest) is not None, f"layers[{i}]: not a sha256 digest")
        out[str(digest)[7:]] = size(mapping(layer, f"layers[{i}]").get("size"), f"layers[{i}].size")
    return out


def _carried(shas: list[tuple[str, int]], blobs: dict[str, int], what: str) -> None:
    for found, length in shas:
        _need(blobs.get(found) == length, f"{what}: names blob {found[:12]} (of {length} bytes), which the entry "
                                          "does not carry")


def layer(record: JsonDoc, blobs: dict[str, int]) -> JsonDoc:
    layers = [pair(v, f"layers[{i}]") for i, v in enumerate(items(record.get("layers"), "layers"))]
    _need(bool(layers), "layers: empty")
    _carried(layers, blobs, "layers")
    return {"layers": [list(p) for p in layers], "name": text(record.get("name", ""), "name")}


def outputs(record: JsonDoc) -> JsonDoc:
    """A component's outputs record (build/outputs.OutputRecord's fields)."""
    wheels = []
    for i, entry in enumerate(items(record.get("wheels") or [], "wheels")):
        item = triple(entry, f"wheels[{i}]: not [file, sha256, size]")
        file = item[0]
        if not isinstance(file, str) or WHEEL.fullmatch(file) is None:
            raise BadEntry(f"wheels[{i}]: not a wheel's file name")
        wheels.append([file, sha(item[1], f"wheels[{i}]"), size(item[2], f"wheels[{i}]")])
    seconds = record.get("seconds", 0.0)
    _need(isinstance(seconds, (int, float)) and 0 <= seconds < 1e7, "seconds: not a duration")
    return {"sha256": sha(record.get("sha256"), "sha256"), "size": size(record.get("size"), "size"),
            "files": size(record.get("files"), "files"), "wheels": wheels,
            "name": text(record.get("name", ""), "name"), "seconds": float(seconds)}


def component_output(record: JsonDoc, blobs: dict[str, int]) -> JsonDoc:
    out = outputs(record)
    _carried([(out["sha256"], out["size"])] + [(w[1], w[2]) for w in out["wheels"]], blobs, "outputs")
    return out


def compiler_cache(record: JsonDoc, blobs: dict[str, int]) -> JsonDoc:
    tars: list[tuple[int, str, int]] = []
    for i, entry in enumerate(items(record.get("tars"), "tars")):
        item = triple(entry, f"tars[{i}]: not [index, sha256, size]")
        index = item[0]
        if type(index) is not int or not 0 <= index < 64:
            raise BadEntry(f"tars[{i}]: not [index, sha256, size]")
        tars.append((index, sha(item[1], f"tars[{i}]"), size(item[2], f"tars[{i}]")))
    _carried([(t[1], t[2]) for t in tars], blobs, "tars")
    return {"tars": [list(t) for t in tars], "name": text(record.get("name", ""), "name"),
            "from": text(record.get("from", ""), "from")}


def substitute(record: JsonDoc) -> JsonDoc:
    """A layer described without its bytes: its blobs, their compressed forms, where those are held."""
    layers = [pair(v, f"layers[{i}]") for i, v in enumerate(items(record.get("layers"), "layers"))]
    _need(bool(layers), "layers: empty")
    made = mapping(record.get("forms"), "forms", len(FORMS))
    _need(bool(made), "forms: empty")
    kept = {}
    for kind, values in made.items():
        _need(kind in FORMS, f"forms: {str(kind)[:40]!r} is no compression of this enginebuild")
        pairs = [pair(v, f"forms.{kind}[{i}]") for i, v in enumerate(items(values, f"forms.{kind}"))]
        _need(len(pairs) == len(layers), f"forms.{kind}: not one per layer")
        kept[kind] = [list(p) for p in pairs]
    homes = mapping(record.get("homes"), "homes")
    where = {}
    for csha, repositories in homes.items():
        found = [r for r in items(repositories, "homes") if isinstance(r, str) and REPOSITORY.fullmatch(r)]
        _need(len(found) == len(repositories), f"homes.{sha(csha, 'homes')[:12]}: not repository names")
        where[csha] = found
    secrets = items(record.get("secrets", []), "secrets")
    _need(all(isinstance(n, str) and SECRET.fullmatch(n) for n in secrets), "secrets: not secret names")
    inert = items(record.get("inert", []), "inert")  # blobs the byte-reading checks read nothing in
    _need(all(isinstance(s, str) and s in {p[0] for p in layers} for s in inert), "inert: not blobs of the layer")
    return {"name": text(record.get("name", ""), "name"), "layers": [list(p) for p in layers], "forms": kept,
            "homes": where, "secrets": list(secrets), "inert": list(inert)}


def described(record: JsonDoc) -> JsonDoc:
    return {"record": outputs(mapping(record.get("record"), "record"))}


def verdict(record: JsonDoc) -> JsonDoc:
    lines = mapping(record.get("lines"), "lines")
    _need(set(lines) <= set(CHECKS), "lines: not the checks' lines")
    return {"lines": {k: text(v, f"lines.{k}") for k, v in lines.items()}}


def checked(kind: str, record: Parsed, blobs: dict[str, int]) -> JsonDoc:
    """The record of an entry of `kind`, in its kind's shape (only the fields it may have), or BadEntry."""
    record = mapping(record, "record")
    readers: dict[str, Callable[[JsonDoc], JsonDoc]] = {
        LAYER: lambda r: layer(r, blobs), OUTPUT: lambda r: component_output(r, blobs),
        COMPILER_CACHE: lambda r: compiler_cache(r, blobs), SUBSTITUTE: substitute, DESCRIBED: described,
        VERDICT: verdict}
    _need(kind in readers, f"{kind}: not a kind of entry")
    return readers[kind](record)
