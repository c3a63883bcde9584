"""Checking a patch stack against the exact upstream source it applies to.

Each patch, in order, is: `applies` (hunk offsets reported), `already-upstream` (the
source already contains its change: the reverse applies), `obsolete` (its header says
upstream fixed it at or before the pinned version or commit) or `conflicts` (which file,
which hunk, and what the source has there instead). Nothing is ever skipped silently.
The outcome carries the patched files too: builds ship exactly what was checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from enginebuild.core.patchfile import PatchFile
from enginebuild.patches.apply import HunkResult, Text, apply_file
from enginebuild.sources.trees import SourceTree
from enginebuild.wire import JsonDoc

APPLIES, UPSTREAM, OBSOLETE, CONFLICTS = "applies", "already-upstream", "obsolete", "conflicts"


@dataclass
class PatchResult:
    name: str
    sha256: str
    subject: str
    status: str
    hunks: list[HunkResult] = field(default_factory=list)  # of the forward application
    conflict: HunkResult | None = None  # the first hunk that failed
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == APPLIES

    @property
    def applied(self) -> bool:
        """Its changes are in the patched tree (it applies, even if its header calls it obsolete)."""
        return self.conflict is None

    def to_json(self) -> JsonDoc:
        doc: dict[str, Any] = {"name": self.name, "sha256": self.sha256, "subject": self.subject,
                               "status": self.status, "detail": self.detail,
                               "hunks": [{"file": h.file, "hunk": h.index, "header": h.header, "offset": h.offset}
                                         for h in self.hunks if h.applied]}
        if self.conflict is not None:
            c = self.conflict
            doc["conflict"] = {"file": c.file, "hunk": c.index, "header": c.header, "problem": c.problem,
                               "expected": c.expected, "found": c.found, "found_at_line": c.found_at}
        return doc


@dataclass
class StackOutcome:
    results: list[PatchResult]
    files: dict[str, bytes | None]  # final contents of every touched path (None: deleted)
    modes: dict[str, int]  # modes the stack set: of files it created, and "new mode" changes

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def first_failure(self) -> PatchResult | None:
        return next((r for r in self.results if not r.applied), None)


def fixed_upstream(patch: PatchFile, tree: SourceTree) -> str | None:
    """Why the header says this patch is no longer needed at this source, or None."""
    fixed = patch.fixed_in
    if fixed.get("commit") and tree.commit and tree.is_ancestor(fixed["commit"], tree.commit):
        return f"its header says upstream fixed it in commit {fixed['commit']}, which {tree.commit[:12]} contains"
    if fixed.get("version") and tree.version:
        try:
            if Version(tree.version) >= Version(fixed["version"]):
                return f"its header says upstream fixed it in {fixed['version']}; the source is {tree.version}"
        except InvalidVersion:
            return None
    return None


def _apply_patch(patch: PatchFile, overlay: dict[str, bytes | None],
                 tree: SourceTree) -> tuple[bool, list[HunkResult], dict[str, bytes | None]]:
    """(all applied?, hunk results, new contents by path) against the overlay of earlier patches."""
    results: list[HunkResult] = []
    updated: dict[str, bytes | None] = {}
    for file_patch in patch.files:
        path = file_patch.path
        link = tree.symlink_on_path(path)
        if link:
            header = file_patch.hunks[0].header if file_patch.hunks else "(empty file)"
            return False, results + [HunkResult(path, 1, header,
                                                problem=f"writes through a symlink in the source ({link})")], {}
        current = updated[path] if path in updated else overlay[path]  # a file may have two sections
        text = Text.parse(current) if current is not None else None
        new_text, hunk_results = apply_file(path, text, file_patch)
        results += hunk_results
        if not all(h.applied for h in hunk_results):
            return False, results, {}
        updated[path] = new_text.dump() if new_text is not None else None
    return True, results, updated


def patch_modes(patch: PatchFile) -> dict[str, int]:
    """The modes a patch sets: a created file's ("new file mode", 0644 by default) and an
    existing file's "new mode"."""
    out: dict[str, int] = {}
    for f in patch.files:
        if f.old_path is None:
            out[f.path] = f.new_mode or 0o644
        elif f.new_mode is not None and f.new_path is not None:
            out[f.path] = f.new_mode
    return out


def check_stack(patches: list[PatchFile], tree: SourceTree) -> StackOutcome:
    paths = sorted({f.path for p in patches for f in p.files})
    overlay = tree.read_many(paths)
    modes: dict[str, int] = {}
    out = []
    for patch in patches:
        applied, hunks, updated = _apply_patch(patch, overlay, tree)
        fixed = fixed_upstream(patch, tree)
        result = PatchResult(patch.name, patch.sha256, patch.subject, APPLIES, hunks=hunks)
        if applied:
            overlay.update(updated)
            modes.update(patch_modes(patch))
            if fixed:
                result.status, result.detail = OBSOLETE, f"{fixed}; it still applies, but drop it from the stack"
            else:
                offsets = [h.offset or 0 for h in hunks]
                moved = [o for o in offsets if o]
                result.detail = (f"{len(hunks)} hunk(s) at offset 0" if not moved else
                                 f"{len(hunks)} hunk(s), offsets " + ", ".join(f"{o:+d}" for o in offsets))
        else:
            result.conflict = next(h for h in hunks if not h.applied)
            reverse_ok, _, _ = _apply_patch(patch.reversed(), overlay, tree)
            if reverse_ok:
                result.status, result.detail = UPSTREAM, "the source already has this change; drop the patch"
            elif fixed:
                result.status, result.detail = OBSOLETE, f"{fixed}; drop it from the stack"
            else:
                c = result.conflict
                result.status, result.detail = CONFLICTS, f"{c.file}: hunk {c.index} {c.header}: {c.problem}"
        out.append(result)
    return StackOutcome(out, overlay, modes)
