"""Every field of a layer's payload shapes its key, unless the kind declares it does not (its
`unkeyed`, each with why): a field added to a kind moves the key or is named there, so a change to
what a layer holds can never leave its key (and a cached layer) as it was. Checked on the payloads
of every layer the catalogue and the examples plan (and an overlay's, made here), each field
changed in turn, nested values included."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from conftest import ROOT
from enginebuild import layerkinds
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


SAMPLES = samples()


@pytest.mark.parametrize("kind", kinds(), ids=lambda k: k.__name__)
def test_every_field_moves_the_key_or_is_declared_unkeyed_with_why(kind):
    assert SAMPLES.get(kind), f"no layer of kind {kind.__name__} is planned here to check"
    assert all(why.strip() for why in kind.unkeyed.values()), kind.unkeyed
    for f in dataclasses.fields(kind):
        keyed = any(moves(sample, f.name) for sample in SAMPLES[kind])
        if f.name in kind.unkeyed:
            assert not keyed, f"{kind.__name__}.{f.name} is declared unkeyed but moves the key"
        else:
            assert keyed, f"{kind.__name__}.{f.name} does not move the key: key it, or declare it in unkeyed with why"


def test_a_field_added_to_a_kind_moves_its_key_or_the_check_names_it():
    @dataclasses.dataclass(frozen=True)
    class Grown(OverlayFiles):
        strip_docs: bool = False  # a new field its key() was not taught

    sample = Grown(*[getattr(SAMPLES[OverlayFiles][0], f.name) for f in dataclasses.fields(OverlayFiles)])
    assert not moves(sample, "strip_docs")  # so the check above fails for it, naming Grown.strip_docs
    assert moves(sample, "installed")
