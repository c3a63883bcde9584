"""`image --output`: the runtime's filesystem and each component's outputs written into folders
of the user's (a subfolder per platform when the build made several)."""

from __future__ import annotations

from enginebuild.errors import UserError
from enginebuild.execution.componentwork import output_record
from enginebuild.execution.export import export_component, export_runtime
from enginebuild.io.progress import output
from enginebuild.io.store import Store
from enginebuild.plan.model import ImagePlan
from enginebuild.usecases.buildrequest import OutputFolders
from enginebuild.workspace import Workspace


def write_outputs(ws: Workspace, plan: ImagePlan, tag: str, outputs: OutputFolders, platform: str | None) -> None:
    """--output: the runtime's filesystem and the components' outputs, into their folders
    (a subfolder per platform when the build made several)."""

    runtime, components = outputs
    sub = platform.replace("/", "_") if platform else ""
    if runtime is not None:
        done = export_runtime(ws.engine(), tag, runtime / sub if sub else runtime)
        output().say(f"  runtime filesystem -> {done}")
    for name, folder in components.items():
        node = next((c for c in plan.components if c.name == name), None)
        if node is None:
            raise UserError(f"--output {name}=…: component {name} is not built for {plan.image}: nothing installs or "
                            "needs it", hint="add it to install:, or to the needs of a component installed")
        record = output_record(Store(ws.home), node.key)
        assert record is not None, f"component {name} was built but has no outputs record"
        done = export_component(Store(ws.home), record, node.outputs, folder / sub if sub else folder)
        output().say(f"  component {name} outputs -> {done}")
