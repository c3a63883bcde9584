"""What each node of an image was last built from (to say which input changed), and how long
each component or command took on this machine (for the ETA of the next build)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from enginebuild.io.files import write_atomic
from enginebuild.wire import JsonDoc

_LOCK = threading.Lock()


class BuildHistory:
    def __init__(self, home: Path):
        self.folder = Path(home) / "history"

    def _path(self, tag: str) -> Path:
        return self.folder / (tag.replace("/", "_").replace(":", "@") + ".json")

    def read(self, tag: str) -> JsonDoc:
        try:
            data = json.loads(self._path(tag).read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def record_nodes(self, tag: str, nodes: list[tuple[str, str, dict[str, str]]]) -> None:
        """Remember the nodes an image now consists of (name, key, inputs); written only when
        something changed."""
        data = self.read(tag)
        fresh = dict(data)
        for name, key, inputs in nodes:
            fresh[name] = {"key": key, "inputs": inputs}
        if fresh != data:
            write_atomic(self._path(tag), (json.dumps(fresh, indent=1, sort_keys=True) + "\n").encode())

    def _seconds_path(self) -> Path:
        return self.folder / "seconds.json"

    def seconds(self, name: str) -> float | None:
        try:
            value = json.loads(self._seconds_path().read_text()).get(name)
        except (OSError, ValueError):
            return None
        return float(value) if isinstance(value, (int, float)) else None

    def remember_seconds(self, name: str, seconds: float) -> None:
        with _LOCK:
            try:
                data = json.loads(self._seconds_path().read_text())
            except (OSError, ValueError):
                data = {}
            data[name] = round(seconds, 2)
            write_atomic(self._seconds_path(), json.dumps(data, sort_keys=True).encode())


def changed_inputs(inputs: dict[str, str], previous: JsonDoc | None) -> list[str]:
    """Names of the inputs that differ from the node's last build, most telling first."""
    if not previous:
        return ["no earlier build"]
    before = previous.get("inputs") or {}
    changed = [name for name, digest in inputs.items() if before.get(name) != digest]
    changed += [f"{name} (removed)" for name in before if name not in inputs]
    if "instructions" in changed and len(changed) > 1:
        changed.remove("instructions")  # implied by the named input that changed them
    return changed or ["an input below it changed"]
