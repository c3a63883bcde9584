"""What each stage of an image was last built from, to say which input changed."""
from __future__ import annotations

import json
from pathlib import Path

from enginebuild.atomic import write_atomic


class BuildHistory:
    def __init__(self, home: Path):
        self.folder = Path(home) / "history"

    def _path(self, image: str) -> Path:
        """`image` is the image's tag (enginebuild/NAME:latest, or :on-... for a stand-in base)."""
        return self.folder / (image.replace("/", "_").replace(":", "@") + ".json")

    def read(self, image: str) -> dict:
        try:
            data = json.loads(self._path(image).read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def record(self, image: str, stages) -> None:
        """Remember the stages an image now consists of; written only when something changed."""
        data = self.read(image)
        fresh = dict(data)
        for stage in stages:
            fresh[stage.name] = {"key": stage.key, "inputs": stage.inputs}
        if fresh != data:
            write_atomic(self._path(image), (json.dumps(fresh, indent=1, sort_keys=True) + "\n").encode())


def changed_inputs(stage, previous: dict | None) -> list:
    """Names of the inputs that differ from the stage's last build, most telling first."""
    if not previous:
        return ["no earlier build of this stage"]
    before = previous.get("inputs") or {}
    changed = [name for name, digest in stage.inputs.items() if before.get(name) != digest]
    changed += [f"{name} (removed)" for name in before if name not in stage.inputs]
    if "parent" in changed and len(changed) > 1:
        changed.remove("parent")
        changed.append("parent")
    if changed == ["parent"]:
        return ["parent stage changed"]
    if changed and changed[-1] == "parent":
        changed[-1] = "parent stage changed"
    if "instructions" in changed and len(changed) > 1:
        changed.remove("instructions")  # implied by the named input that changed them
    return changed or ["same inputs as the last build, but its image is gone"]
