"""Layer kinds: what a layer of a runtime image holds and how it is written, one module per
kind (base.py says what each kind answers). Adding one: a module here and the line of plan/
that adds it where the spec asks for it; `KINDS` lists them for the docs and the tests."""

from __future__ import annotations

from enginebuild.layerkinds.base import LayerPayload
from enginebuild.layerkinds.bytecode import Bytecode
from enginebuild.layerkinds.commands import Run
from enginebuild.layerkinds.data import Data
from enginebuild.layerkinds.files import Files
from enginebuild.layerkinds.outputs import OutputTree
from enginebuild.layerkinds.overlay import OverlayFiles
from enginebuild.layerkinds.patchedfiles import PatchedFiles
from enginebuild.layerkinds.system import Sysroot
from enginebuild.layerkinds.wheel import Wheel
from enginebuild.layerkinds.wheels import Wheels

KINDS: tuple[type[LayerPayload], ...] = (Sysroot, Run, Wheels, Wheel, OutputTree, PatchedFiles, OverlayFiles, Data,
                                         Files, Bytecode)

__all__ = ["KINDS", "Bytecode", "Data", "Files", "LayerPayload", "OutputTree", "OverlayFiles", "PatchedFiles", "Run", "Sysroot",
           "Wheel", "Wheels"]
