"""The runtime image as the Dockerfile it is equivalent to: for reading (`render`), and, for
its last part (manifest, files, settings), as a buildable context (`render --out`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from enginebuild.core.imagesettings import SETTINGS
from enginebuild.plan.envs import CHAIN_REPO
from enginebuild.plan.model import ImagePlan, ImageSettings, LayerNode
from enginebuild.plan.quote import dockerfile_string, exec_form
from enginebuild.plan.render import render

if TYPE_CHECKING:
    from enginebuild.recipe.model import Healthcheck


def _healthcheck(instruction: str, value: object, settings: ImageSettings) -> list[str]:
    check = cast("Healthcheck", value)
    if check.test[0] == "NONE":
        return [f"{instruction} NONE"]
    options = ""
    for text, flag in ((check.interval, "interval"), (check.timeout, "timeout"), (check.start_period, "start-period")):
        if text:
            options += f" --{flag}={text}"
    if check.retries is not None:
        options += f" --retries={check.retries}"
    test = list(check.test[1:]) if check.test[0] == "CMD" else ["/bin/sh", "-c", check.test[1]]
    return [f"{instruction}{options} CMD {exec_form(test)}"]


def _pairs(instruction: str, value: object, settings: ImageSettings) -> list[str]:
    pairs = cast("tuple[tuple[str, str], ...]", value)
    return [instruction + "".join(f" {name}={dockerfile_string(v)}" for name, v in pairs)] if pairs else []


def _labels(instruction: str, value: object, settings: ImageSettings) -> list[str]:
    labels = sorted(cast("dict[str, str]", value).items())
    line = instruction + "".join(f" {dockerfile_string(k)}={dockerfile_string(v)}" for k, v in labels)
    return ([line] if labels else []) + [
        f"# label {name} removed by enginebuild: a Dockerfile cannot remove a base's label (LABEL sets it)"
        for name in settings.labels_removed]


def _ports(instruction: str, value: object, settings: ImageSettings) -> list[str]:
    return [f"{instruction} {port.removesuffix('/tcp')}" for port in cast("tuple[str, ...]", value)]  # 8000 is TCP


def _word(instruction: str, value: object, settings: ImageSettings) -> list[str]:
    return [f"{instruction} {value}"]


def _exec(instruction: str, value: object, settings: ImageSettings) -> list[str]:
    return [f"{instruction} {exec_form(cast('tuple[str, ...]', value))}"]


# how each form of instruction is written (core/imagesettings.py names a setting's form)
FORMS: dict[str, Callable[[str, object, ImageSettings], list[str]]] = {
    "pairs": _pairs, "labels": _labels, "ports": _ports, "word": _word, "exec": _exec, "healthcheck": _healthcheck}


def settings_lines(settings: ImageSettings) -> list[str]:
    """The image's settings as Dockerfile instructions, in the table's order."""
    lines = [f"# {settings.env_note}"] if settings.env_note else []
    for setting in SETTINGS:
        value = settings.values.get(setting.field)
        if setting.sets(value):
            lines += FORMS[setting.form](setting.instruction, value, settings)
    return lines


def layer_line(node: LayerNode, index: int) -> str:
    return node.payload.describe(node.name, tail_folder(node, index))


def tail_folder(node: LayerNode, index: int) -> str:
    """Where `render --out` puts a manifest or files layer in the tail's context: named by the
    layer's content key, so a changed layer is a new path to BuildKit (see usecases/rendering.py)."""
    if node.payload.starts_tail:
        return f"manifest-{node.key[:12]}"
    return f"files/{index:02d}-{node.key[:12]}"


def runtime_dockerfile(plan: ImagePlan) -> str:
    lines = [layer_line(node, i) for i, node in enumerate(plan.runtime.layers)]
    base = plan.runtime.base.ref if plan.runtime.base else "scratch"
    return render("runtime.Dockerfile", image=plan.image, platform=plan.platform, base=base, layers=lines,
                  settings=settings_lines(plan.config))


def tail_start(plan: ImagePlan) -> int:
    """Index of the first layer of the tail (manifest and files): everything after it is files."""
    return next(i for i, node in enumerate(plan.runtime.layers) if node.payload.starts_tail)


def tail_dockerfile(plan: ImagePlan) -> str:
    """The manifest, files and settings as a Dockerfile buildable on the chain below them."""
    start = tail_start(plan)
    parent = plan.runtime.layers[start - 1].chain if start else plan.runtime.root
    base = f"{CHAIN_REPO}:{parent}" if start else (plan.runtime.base.ref if plan.runtime.base else "scratch")
    lines = [layer_line(node, i).split("   #")[0] for i, node in enumerate(plan.runtime.layers) if i >= start]
    return render("runtime.Dockerfile", image=plan.image, platform=plan.platform, base=base, layers=lines,
                  settings=settings_lines(plan.config))
