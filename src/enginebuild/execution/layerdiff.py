"""What differs between two layers (uncompressed tars): per path its kind, size, mode, owner,
mtime, link target and content hash; the first differences, in path order, diffoscope-style."""

from __future__ import annotations

import hashlib
import tarfile
from dataclasses import dataclass
from pathlib import Path

SHOWN = 8


@dataclass(frozen=True)
class Entry:
    kind: str
    size: int
    mode: int
    owner: str
    mtime: int
    link: str
    sha256: str

    def describe(self) -> str:
        text = f"{self.kind} size {self.size} mode {self.mode:o} owner {self.owner} mtime {self.mtime}"
        if self.link:
            text += f" -> {self.link}"
        if self.sha256:
            text += f" sha256 {self.sha256[:12]}"
        return text


def _kind(member: tarfile.TarInfo) -> str:
    if member.isfile():
        return "file"
    if member.isdir():
        return "dir"
    if member.issym():
        return "symlink"
    if member.islnk():
        return "hardlink"
    return "special"


def entries(tar_path: Path) -> dict[str, Entry]:
    out = {}
    with tarfile.open(tar_path, "r:") as tar:
        for member in tar:
            digest = ""
            if member.isfile():
                handle = tar.extractfile(member)
                assert handle is not None
                hasher = hashlib.sha256()
                while block := handle.read(1 << 20):
                    hasher.update(block)
                digest = hasher.hexdigest()
            name = "/" + (member.name[2:] if member.name.startswith("./") else member.name).lstrip("/")
            out[name] = Entry(_kind(member), member.size, member.mode, f"{member.uid}:{member.gid}",
                              int(member.mtime), member.linkname, digest)
    return out


def _shown(field: str, value: object) -> str:
    if field == "mode":
        return f"{value:o}"
    if field == "sha256":
        return str(value)[:12]
    return str(value)


def differences(expected: Path, actual: Path, limit: int = SHOWN) -> list[str]:
    """Lines naming the first paths whose entries differ (or exist on one side only)."""
    left, right = entries(expected), entries(actual)
    out = []
    for path in sorted(set(left) | set(right)):
        a, b = left.get(path), right.get(path)
        if a == b:
            continue
        if a is None:
            out.append(f"{path}: only in the rebuild ({b.describe() if b else ''})")
        elif b is None:
            out.append(f"{path}: missing from the rebuild (was {a.describe()})")
        else:
            changed = [f"{field} {_shown(field, getattr(a, field))} -> {_shown(field, getattr(b, field))}"
                       for field in ("kind", "size", "mode", "owner", "mtime", "link", "sha256")
                       if getattr(a, field) != getattr(b, field)]
            out.append(f"{path}: {', '.join(changed)}")
        if len(out) >= limit:
            out.append("... (more differences not shown)")
            break
    if not out:
        out.append("the same entries, in a different order or with different tar headers")
    return out
