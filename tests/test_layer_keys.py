"""A layer's key is derived from its payload's fields (core/keys.py): every field shapes it,
unless the field declares it does not (`unkeyed(why)` at its declaration), so a field added to a
kind, or to a value a kind holds, moves the key without anyone teaching a key() about it. Checked
on the payloads of every layer the catalogue and the examples plan (and an overlay's, made here),
each field changed in turn, nested values included."""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest

from conftest import ROOT
from enginebuild import layerkinds
from enginebuild.core import keys
from enginebuild.layerkinds.base import LayerPayload
from enginebuild.layerkinds.overlay import OverlayFiles
from enginebuild.plan.image import plan_image
from enginebuild.workspace import Workspace


def kinds() -> list[type[LayerPayload]]:
    import importlib
    import pkgutil

    for module in pkgutil.iter_modules(layerkinds.__path__):
        importlib.import_module(f"enginebuild.layerkinds.{module.name}")
    return sorted({k for k in _subclasses(LayerPayload)}, key=lambda k: k.__name__)


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("enginebuild."):
            out |= {sub} | _subclasses(sub)
    return out


@functools.cache
def samples() -> dict[type, list[LayerPayload]]:
    """The payload of every layer the catalogue and the examples plan here, and an overlay's."""
    found: dict[type, list[LayerPayload]] = {}
    for root in (ROOT, ROOT / "examples"):
        ws = Workspace(root)
        for name in ws.catalog.names():
            spec = ws.spec(name)
            if spec.abstract:
                continue
            for platform in spec.platforms:
                try:
                    plan = plan_image(spec, ws.lock(spec), platform, ws.plan_options(strict=False))
                except Exception:  # noqa: BLE001 - a base that cannot be pinned here: not planned
                    continue
                for node in plan.runtime.layers:
                    found.setdefault(type(node.payload), []).append(node.payload)
    patched = next(p for p in found.get(layerkinds.patchedfiles.PatchedFiles, []) if p.patches)
    patches = patched.patches
    run = found[layerkinds.commands.Run][0]  # and commands with a file in their context, as a step's
    found[layerkinds.commands.Run].append(dataclasses.replace(run, context=(patched.tree,)))
    wheels = found[layerkinds.wheels.Wheels][0]  # and distributions that replace some of a base's
    found[layerkinds.wheels.Wheels].append(dataclasses.replace(
        wheels, base="nvcr.io/nvidia/pytorch:26.01-py3", removes=(("six", "usr/lib/python3/dist-packages/six-1.16.0.dist-info"),),
        base_digest="sha256:" + "b" * 64))
    found[OverlayFiles] = [OverlayFiles("vllm", "/usr/lib/python3/dist-packages/vllm", patches, source=None,
                                        base="a" * 64)]
    return found


def changed(value):
    """Each way of changing one thing in a value (a nested value's fields, a tuple's items, an empty
    tuple of text given an item), the value as changed."""
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, int):
        yield value + 1
    elif isinstance(value, str):
        yield value + "x"
    elif isinstance(value, bytes):
        yield value + b"x"
    elif isinstance(value, Path):
        yield value.with_name(value.name + "x")
    elif isinstance(value, tuple):
        if not value:
            yield ("x",)
        for i, item in enumerate(value):
            for other in changed(item):
                yield value[:i] + (other,) + value[i + 1:]
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            for other in changed(getattr(value, f.name)):
                yield dataclasses.replace(value, **{f.name: other})


def moves(payload: LayerPayload, field: str) -> bool:
    base = payload.key(1)
    for other in changed(getattr(payload, field)):
        try:
            if dataclasses.replace(payload, **{field: other}).key(1) != base:
                return True
        except (KeyError, TypeError, AttributeError, ValueError):  # a change the kind's own data refuses
            continue
    return False


@pytest.mark.parametrize("kind", kinds(), ids=lambda k: k.__name__)
def test_every_field_moves_the_key_or_is_declared_unkeyed_with_why(kind):
    assert samples().get(kind), f"no layer of kind {kind.__name__} is planned here to check"
    unkeyed = keys.unkeyed_fields(kind)
    assert all(why.strip() for why in unkeyed.values()), unkeyed
    for f in dataclasses.fields(kind):
        keyed = any(moves(sample, f.name) for sample in samples()[kind])
        if f.name in unkeyed:
            assert not keyed, f"{kind.__name__}.{f.name} is declared unkeyed but moves the key"
        else:
            assert keyed, f"{kind.__name__}.{f.name} does not move the key"


def field_changes(value):
    """(owner type, field, `value` with that field changed) for each field of each value a keyed
    field holds, through tuples (their first item) and nested values; not into a field that is
    unkeyed or keyed as a projection (the projection is what is keyed there)."""
    if isinstance(value, tuple) and value:
        for owner, name, other in field_changes(value[0]):
            yield owner, name, (other, *value[1:])
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            for other in changed(item):
                yield type(value), f.name, dataclasses.replace(value, **{f.name: other})
            if keys.UNKEYED not in f.metadata and keys.KEYED_AS not in f.metadata:
                for owner, name, other in field_changes(item):
                    yield owner, name, dataclasses.replace(value, **{f.name: other})


def test_every_field_of_a_value_a_kind_holds_moves_the_key_or_is_declared_unkeyed():
    """A wheel pin, a .deb pin, a file entry, a context item, a patch reference: each field of
    such a value in a layer moves the layer's key unless it says at its declaration why not."""
    moved: dict[tuple[type, str], bool] = {}
    for samples_of_kind in samples().values():
        for sample in samples_of_kind:
            base = sample.key(1)
            for f in dataclasses.fields(sample):
                if keys.UNKEYED in f.metadata or keys.KEYED_AS in f.metadata:
                    continue
                for owner, name, other in field_changes(getattr(sample, f.name)):
                    try:
                        moves_it = dataclasses.replace(sample, **{f.name: other}).key(1) != base
                    except (KeyError, TypeError, AttributeError, ValueError):
                        continue
                    moved[(owner, name)] = moved.get((owner, name), False) or moves_it
    owners = {owner for owner, _ in moved}
    assert {o.__name__ for o in owners} >= {"FileEntry", "PyPin", "DebPin", "ContextItem", "PatchRef", "Outputs"}
    for (owner, name), moves_it in sorted(moved.items(), key=lambda i: (i[0][0].__name__, i[0][1])):
        if name in keys.unkeyed_fields(owner):
            assert not moves_it, f"{owner.__name__}.{name} is declared unkeyed but moves the key"
        else:
            assert moves_it, f"{owner.__name__}.{name} does not move the key"


def test_no_kind_writes_its_key_by_hand():
    """One derivation for every kind: a kind that overrode key() would be back to a hand-kept list."""
    for kind in kinds():
        assert kind.key is LayerPayload.key, f"{kind.__name__} overrides key()"


def test_a_field_added_to_a_kind_moves_its_key_untaught():
    @dataclasses.dataclass(frozen=True)
    class Grown(OverlayFiles):
        strip_docs: bool = False  # a new field nobody wrote a key for

    sample = Grown(*[getattr(samples()[OverlayFiles][0], f.name) for f in dataclasses.fields(OverlayFiles)])
    assert sample.key(1) != dataclasses.replace(sample, strip_docs=True).key(1)
    assert moves(sample, "installed")


def test_a_field_added_at_its_default_keeps_the_key():
    """A new field whose default keeps today's bytes keeps today's keys (defaults are left out)."""
    @dataclasses.dataclass(frozen=True)
    class Grown(OverlayFiles):
        strip_docs: bool = False

    plain = samples()[OverlayFiles][0]
    grown = Grown(*[getattr(plain, f.name) for f in dataclasses.fields(OverlayFiles)])
    assert keys.fields_form(grown, "x") == keys.fields_form(plain, "x")


def test_a_field_added_to_a_value_a_kind_holds_moves_the_key():
    """Nested values are keyed by their fields too: a wheel pin that grows a field is keyed by it."""
    from enginebuild.lock.pins import PyPin

    @dataclasses.dataclass(frozen=True)
    class GrownPin(PyPin):
        build_tag: str = ""

    wheels = samples()[layerkinds.wheels.Wheels][0]
    pin = wheels.pins[0]
    grown = GrownPin(*[getattr(pin, f.name) for f in dataclasses.fields(PyPin)])
    tagged = dataclasses.replace(grown, build_tag="1")
    assert dataclasses.replace(wheels, pins=(tagged, *wheels.pins[1:])).key(1) != \
        dataclasses.replace(wheels, pins=(grown, *wheels.pins[1:])).key(1)


def test_a_host_path_cannot_reach_a_key():
    """A value with no key form (a host path) is refused where it would be keyed, naming the field."""
    @dataclasses.dataclass(frozen=True)
    class Leaky(OverlayFiles):
        scratch: Path | None = None

    sample = Leaky(*[getattr(samples()[OverlayFiles][0], f.name) for f in dataclasses.fields(OverlayFiles)])
    sample.key(1)  # at its default: left out
    with pytest.raises(keys.Unkeyable, match=r"Leaky\.scratch: a PosixPath has no key form"):
        dataclasses.replace(sample, scratch=ROOT).key(1)


def test_an_unkeyed_field_says_why():
    with pytest.raises(ValueError, match="says why"):
        keys.unkeyed(" ")
