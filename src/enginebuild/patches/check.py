"""Checking a patch stack against the exact upstream source it applies to.

Each patch, in order, is: `applies` (hunk offsets reported), `already-upstream` (the
source already contains its change: the reverse applies), `obsolete` (its header says
upstream fixed it at or before the pinned version or commit) or `conflicts` (which file,
which hunk, and what the source has there instead). Nothing is ever skipped silently.
The outcome carries the patched files too: builds ship exactly what was checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from enginebuild.core.patchfile import FilePatch, PatchFile
from enginebuild.patches.apply import HunkResult, Text, apply_binary, apply_file
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
        doc: JsonDoc = {"name": self.name, "sha256": self.sha256, "subject": self.subject,
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


def _apply_patch(patch: PatchFile, overlay: dict[str, bytes | None], modes: dict[str, int], tree: SourceTree
                 ) -> tuple[bool, list[HunkResult], dict[str, bytes | None], dict[str, int]]:
    """(all applied?, hunk results, new contents by path, modes it sets) against the overlay of
    earlier patches (and the modes they set)."""
    results: list[HunkResult] = []
    updated: dict[str, bytes | None] = {}
    new_modes: dict[str, int] = {}

    def now(path: str) -> bytes | None:  # a file may have two sections, or be renamed and then changed
        return updated[path] if path in updated else overlay.get(path)

    for file_patch in patch.files:
        header = file_patch.hunks[0].header if file_patch.hunks else "(empty file)"
        for path in dict.fromkeys(p for p in (file_patch.old_path, file_patch.new_path) if p):
            link = tree.symlink_on_path(path)
            if link:
                return False, results + [HunkResult(path, 1, header, problem=f"writes through a symlink in the "
                                                                              f"source ({link})")], {}, {}
        path, source = file_patch.path, file_patch.old_path or file_patch.path
        if file_patch.moves and now(file_patch.path) is not None:
            what = "copy" if file_patch.copy else "rename"
            return False, results + [HunkResult(path, 1, header, problem=f"the {what} of {source} would overwrite "
                                                                          f"{path}, which exists (git refuses it too)")
                                     ], {}, {}
        data = now(source)
        if file_patch.binary is not None:
            written, hunk_results = apply_binary(path, data, file_patch)
        else:
            new_text, hunk_results = apply_file(path, Text.parse(data) if data is not None else None, file_patch)
            written = new_text.dump() if new_text is not None else None
        results += hunk_results
        if not all(h.applied for h in hunk_results):
            return False, results, {}, {}
        updated[path] = written
        if file_patch.moves and not file_patch.copy:
            updated[source] = None
        mode = _mode_after(file_patch, modes | new_modes, tree)
        if mode is not None:
            new_modes[path] = mode
    return True, results, updated, new_modes


def _mode_after(f: FilePatch, modes: dict[str, int], tree: SourceTree) -> int | None:
    """The mode a section leaves its file with, where it sets one: a created file's ("new file
    mode", 0644 by default), a "new mode", and a renamed or copied file's (its source's)."""
    if f.new_path is None:
        return None
    if f.old_path is None:
        return f.new_mode or 0o644
    if f.new_mode is not None:
        return f.new_mode
    if f.moves:
        return modes[f.old_path] if f.old_path in modes else tree.mode(f.old_path)
    return None


def check_stack(patches: list[PatchFile], tree: SourceTree) -> StackOutcome:
    paths = sorted({p for patch in patches for f in patch.files for p in (f.old_path, f.new_path) if p})
    overlay = tree.read_many(paths)
    modes: dict[str, int] = {}
    out = []
    for patch in patches:
        applied, hunks, updated, set_modes = _apply_patch(patch, overlay, modes, tree)
        fixed = fixed_upstream(patch, tree)
        result = PatchResult(patch.name, patch.sha256, patch.subject, APPLIES, hunks=hunks)
        if applied:
            overlay.update(updated)
            modes.update(set_modes)
            if fixed:
                result.status, result.detail = OBSOLETE, f"{fixed}; it still applies, but drop it from the stack"
            else:
                offsets = [h.offset or 0 for h in hunks]
                moved = [o for o in offsets if o]
                result.detail = (f"{len(hunks)} hunk(s) at offset 0" if not moved else
                                 f"{len(hunks)} hunk(s), offsets " + ", ".join(f"{o:+d}" for o in offsets))
        else:
            result.conflict = next(h for h in hunks if not h.applied)
            reverse_ok = _apply_patch(patch.reversed(), overlay, modes, tree)[0]
            if reverse_ok:
                result.status, result.detail = UPSTREAM, "the source already has this change; drop the patch"
            elif fixed:
                result.status, result.detail = OBSOLETE, f"{fixed}; drop it from the stack"
            else:
                c = result.conflict
                result.status, result.detail = CONFLICTS, f"{c.file}: hunk {c.index} {c.header}: {c.problem}"
        out.append(result)
    return StackOutcome(out, overlay, modes)
