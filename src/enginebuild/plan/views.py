"""The runtime image as the Dockerfile it is equivalent to: for reading (`render`), and, for
its last part (manifest, files, settings), as a buildable context (`render --out`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from enginebuild.plan.envs import CHAIN_REPO
from enginebuild.plan.model import ImagePlan, LayerNode
from enginebuild.plan.render import TemplateValues, render

if TYPE_CHECKING:
    from enginebuild.recipe.model import Healthcheck


def _healthcheck(check: Healthcheck | None) -> TemplateValues | None:
    if check is None:
        return None
    options = ""
    for field, flag in (("interval", "interval"), ("timeout", "timeout"), ("start_period", "start-period")):
        if getattr(check, field):
            options += f" --{flag}={getattr(check, field)}"
    if check.retries is not None:
        options += f" --retries={check.retries}"
    if check.test[0] == "NONE":
        return {"options": "", "test": None}
    test = list(check.test[1:]) if check.test[0] == "CMD" else ["/bin/sh", "-c", check.test[1]]
    return {"options": options, "test": test}


def layer_line(node: LayerNode, index: int) -> str:
    return node.payload.describe(node.name, tail_folder(node, index))


def tail_folder(node: LayerNode, index: int) -> str:
    """Where `render --out` puts a manifest or files layer in the tail's context: named by the
    layer's content key, so a changed layer is a new path to BuildKit (see usecases/rendering.py)."""
    if node.payload.starts_tail:
        return f"manifest-{node.key[:12]}"
    return f"files/{index:02d}-{node.key[:12]}"


def settings_values(plan: ImagePlan) -> TemplateValues:
    c = plan.config
    return {"env": list(c.env), "env_note": c.env_note, "labels": sorted(c.labels.items()),
            "expose": [p.removesuffix("/tcp") for p in c.expose],  # EXPOSE 8000 is TCP
            "labels_removed": list(c.labels_removed),
            "workdir": c.workdir, "user": c.user, "shell": c.shell, "stopsignal": c.stopsignal,
            "healthcheck": _healthcheck(c.healthcheck), "entrypoint": c.entrypoint, "cmd": c.cmd}


def runtime_dockerfile(plan: ImagePlan) -> str:
    lines = [layer_line(node, i) for i, node in enumerate(plan.runtime.layers)]
    base = plan.runtime.base.ref if plan.runtime.base else "scratch"
    return render("runtime.Dockerfile", image=plan.image, platform=plan.platform, base=base, layers=lines,
                  **settings_values(plan))


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
                  **settings_values(plan))
