"""Patch files: a DEP-3-like header, then a git-style unified diff.

    Subject: one line saying what the patch does
    Description: why it exists (continuation lines start with a space)
    Upstream: the PR or commit that fixes or supersedes it (or "not forwarded: why")
    Fixed-In: first upstream version and/or commit where it is no longer needed (optional)
    ---
    diff --git a/path b/path
    ...

What `diff -u`, `git diff` and `git format-patch` write is taken too: a bare diff has no header
(the spec's lint warns, naming the fields it lacks), a mail of format-patch gives its subject
(without `[PATCH n/m]`) and its message as Subject and Description, its signature is dropped.
Loading lints it: a header begun and left incomplete, a path that is absolute or leaves the
tree, a symlink, a binary change without its data, or a malformed hunk is an error naming the
file.
Renames and copies, git binary patches (core/gitbinary.py) and git's quoted names are read
as git writes them.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace

from enginebuild.core.gitbinary import BinaryPatchError, Fragment, read_fragment
from enginebuild.errors import UserError
from enginebuild.io.files import image_mode

REQUIRED = ("Subject", "Description", "Upstream")
_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)")
_FIELD = re.compile(r"([A-Z][A-Za-z0-9-]*):(.*)")
_HEX = re.compile(r"[0-9a-f]{7,40}")
_MAIL = re.compile(r"From [0-9a-f]{40} ")  # the first line git format-patch writes
_PATCH_TAG = re.compile(r"\[PATCH[^\]]*\]\s*")


class PatchError(UserError):
    pass


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    section: str
    lines: tuple[tuple[str, str], ...]  # (tag, text) with tag in " -+"; text without its newline
    old_eof_newline: bool = True  # False when "\ No newline at end of file" follows the old side's last line
    new_eof_newline: bool = True

    @property
    def header(self) -> str:
        return f"@@ -{self.old_start},{self.old_len} +{self.new_start},{self.new_len} @@"

    @property
    def old_lines(self) -> list[str]:
        return [t for tag, t in self.lines if tag in " -"]

    @property
    def new_lines(self) -> list[str]:
        return [t for tag, t in self.lines if tag in " +"]

    def reversed(self) -> Hunk:
        swap = {" ": " ", "-": "+", "+": "-"}
        return Hunk(self.new_start, self.new_len, self.old_start, self.old_len, self.section,
                    tuple((swap[tag], t) for tag, t in self.lines), self.new_eof_newline, self.old_eof_newline)


@dataclass(frozen=True)
class BinaryChange:
    """A git binary patch: the forward fragment, the reverse one (git writes both), and the blob
    ids of the file before and after (`index OLD..NEW`), which git checks."""

    forward: Fragment
    reverse: Fragment | None
    old_id: str
    new_id: str

    def reversed(self) -> BinaryChange:
        if self.reverse is None:
            raise ValueError("no reverse fragment")
        return BinaryChange(self.reverse, self.forward, self.new_id, self.old_id)


@dataclass(frozen=True)
class FilePatch:
    old_path: str | None  # None: the patch creates the file
    new_path: str | None  # None: the patch deletes the file
    hunks: tuple[Hunk, ...]
    new_mode: int | None = None  # the mode the file gets ("new file mode" or "new mode"); None: unchanged
    old_mode: int | None = None  # "old mode": what the file had, where the patch changes it
    copy: bool = False  # old_path is copied to new_path (and kept); old != new without it: a rename
    binary: BinaryChange | None = None  # a git binary patch instead of hunks

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def moves(self) -> bool:
        """A rename or copy: the change is read from old_path and written at new_path."""
        return bool(self.old_path and self.new_path and self.old_path != self.new_path)

    def reversed(self) -> FilePatch:
        return FilePatch(self.new_path, self.old_path, tuple(h.reversed() for h in self.hunks), self.old_mode,
                         self.new_mode, self.copy,  # a copy reversed is a copy back, which git refuses as well
                         self.binary.reversed() if self.binary and self.binary.reverse else self.binary)


@dataclass(frozen=True)
class PatchFile:
    name: str
    sha256: str
    header: dict[str, str]
    files: tuple[FilePatch, ...]

    @property
    def subject(self) -> str:
        return self.header.get("Subject", "")

    @property
    def lacks(self) -> tuple[str, ...]:
        """The header fields a bare diff or a mail of format-patch did not give."""
        return tuple(f for f in REQUIRED if not self.header.get(f))

    @property
    def fixed_in(self) -> dict[str, str]:
        """{"version": "0.22.0", "commit": "c628a93a64"} from the Fixed-In field, where given."""
        text = self.header.get("Fixed-In", "").strip()
        out: dict[str, str] = {}
        if not text or text.lower() in ("none", "-", "n/a"):
            return out
        said = ""  # the word before a token ("commit 5723463658" is a commit, all digits or not)
        for token in re.split(r"[\s,;()]+", text):
            token = token.strip()
            if not token or token.lower() in ("commit", "version", "in"):
                said = token.lower() or said
                continue
            commit = said == "commit" or not re.fullmatch(r"\d+", token)
            said = ""
            if _HEX.fullmatch(token) and commit:
                out.setdefault("commit", token)
            elif re.fullmatch(r"v?\d+(?:\.\d+)*(?:[a-z0-9.+-]*)", token):
                out.setdefault("version", token.lstrip("v"))
        return out

    def reversed(self) -> PatchFile:
        """The patch undone: each file's change reversed, in reverse order (a file patched twice
        is undone from its last section)."""
        return PatchFile(self.name, self.sha256, self.header, tuple(f.reversed() for f in reversed(self.files)))


def git_mode(meta: str) -> int:
    """The file mode a git header line (`new mode 100755`) gives, by the one rule for modes."""
    word = meta.split()[-1] if meta.split() else ""
    return image_mode(int(word, 8)) if re.fullmatch(r"[0-7]{1,7}", word) else 0o644


def _fail(name: str, line: int | None, message: str) -> PatchError:
    where = f"patches/{name}" + (f":{line}" if line else "")
    return PatchError(f"{where}: {message}")


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote(name: str, line: int, raw: str) -> tuple[str, str]:
    """Git's C-style quoted name at the start of `raw` (`"a/caf\\303\\251.txt"`): the name, its
    bytes read as UTF-8 (others kept byte for byte), and what follows it."""
    out = bytearray()
    i = 1
    while i < len(raw):
        c = raw[i]
        if c == '"':
            return out.decode("utf-8", "surrogateescape"), raw[i + 1:]
        if c == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            if re.fullmatch(r"[0-3][0-7]{2}", raw[i + 1:i + 4]):
                out.append(int(raw[i + 1:i + 4], 8))
                i += 4
                continue
            raise _fail(name, line, f"quoted path {raw!r}: unknown escape \\{nxt}")
        out += c.encode("utf-8", "surrogateescape")
        i += 1
    raise _fail(name, line, f"quoted path {raw!r} has no closing quote")


def _clean_path(name: str, line: int, raw: str, strip: str, *, decoded: bool = False) -> str | None:
    """A path of the tree from a name as the patch writes it (quoted or not; on ---/+++ lines a tab
    may follow it), or from a name already `decoded`; None for /dev/null."""
    if decoded:
        pass
    elif raw.startswith('"'):
        raw, _ = unquote(name, line, raw)
    else:
        raw = raw.split("\t", 1)[0].rstrip()
    if raw == "/dev/null":
        return None
    if raw.startswith("/"):
        raise _fail(name, line, f"absolute path {raw!r}: patches must name paths inside the tree")
    if not raw.startswith(strip):
        raise _fail(name, line, f"path {raw!r} does not start with {strip!r} (git-style a/ b/ paths expected)")
    path = raw[len(strip):]
    parts = path.split("/")
    if not path or any(p in ("", ".", "..") for p in parts):
        raise _fail(name, line, f"path {raw!r} leaves the tree or is not normal")
    if ".git" in parts or any(ord(c) < 32 or c == "\\" for c in path):
        raise _fail(name, line, f"path {raw!r} is not allowed")
    if any("\udc80" <= c <= "\udcff" for c in path):
        raise _fail(name, line, "a path that is not UTF-8 (quoted or not); file names must be UTF-8 (their "
                                "contents may be anything)")
    return path


def parse_patch(name: str, data: bytes) -> PatchFile:
    text = data.decode("utf-8", "surrogateescape")  # lines in any encoding, byte for byte, as git takes them
    if text and not text.endswith("\n"):
        raise _fail(name, text.count("\n") + 1, "the file does not end with a newline; git apply calls such a "
                                                 "patch corrupt (add the final newline)")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) >= 2 and lines[-2] == "-- ":  # format-patch's signature (git's version)
        del lines[-2:]
    mail = bool(lines) and _MAIL.match(lines[0]) is not None
    header, i = _mail_header(lines) if mail else _dep3_header(name, lines)
    files = []
    while i < len(lines):
        i, file_patch = _parse_file(name, lines, i)
        files.append(file_patch)
    if not files:
        raise _fail(name, None, f"no diff after the {'message' if mail else 'header'}")
    return PatchFile(name=name, sha256=hashlib.sha256(data).hexdigest(), header=header, files=tuple(files))


HEADER_SUFFIX = ".header"  # beside a bare patch: its header, where the patch's own bytes must stay as they are


def with_header_file(patch: PatchFile, name: str, data: bytes) -> PatchFile:
    """A bare patch with the header its `NAME.header` file gives (the same `Field: value` lines a
    patch's own header has; a recipe's sha256 receipts of its patch files keep holding)."""
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    header, end = _dep3_header(name, [line for line in lines if line.strip() != "---"])
    if end < len([line for line in lines if line.strip() != "---"]) or not header:
        raise _fail(name, None, "holds something other than `Field: value` lines (a header, no diff)")
    if patch.header:
        raise _fail(name, None, f"{patch.name} has a header of its own: one header, in one place")
    missing = [f for f in REQUIRED if not header.get(f)]
    if missing:
        raise _fail(name, None, f"header lacks {', '.join(missing)}")
    return replace(patch, header=header)


def _dep3_header(name: str, lines: list[str]) -> tuple[dict[str, str], int]:
    """The `Field: value` lines before the diff (none: a bare diff), and where the diff starts."""
    header: dict[str, str] = {}
    i, last = 0, None
    while i < len(lines) and not (lines[i].startswith("diff --git ") or lines[i].startswith("--- ")):
        line = lines[i]
        if line.strip() == "---" or not line.strip():
            last = None
        elif line[:1] in (" ", "\t") and last:
            header[last] += "\n" + line.strip()
        else:
            match = _FIELD.fullmatch(line)
            if not match:
                raise _fail(name, i + 1, f"header line is not 'Field: value': {line[:60]!r}")
            last = match.group(1)
            if last in header:
                raise _fail(name, i + 1, f"header field {last} given twice")
            header[last] = match.group(2).strip()
        i += 1
    missing = [f for f in REQUIRED if not header.get(f)]
    if missing and header:  # a header begun and left incomplete (a bare diff has none: the lint warns)
        raise _fail(name, None, f"header lacks {', '.join(missing)}")
    return header, i


def _mail_header(lines: list[str]) -> tuple[dict[str, str], int]:
    """Subject and Description from a mail of git format-patch, and where its diff starts."""
    fields: dict[str, str] = {}
    i, last = 1, ""
    while i < len(lines) and lines[i]:
        line = lines[i]
        if line[:1] in (" ", "\t") and last:
            fields[last] += " " + line.strip()
        elif ":" in line:
            last, _, value = line.partition(":")
            fields[last] = value.strip()
        i += 1
    body: list[str] = []
    while i < len(lines) and lines[i] != "---" and not lines[i].startswith("diff --git "):
        body.append(lines[i])
        i += 1
    if i < len(lines) and lines[i] == "---":
        i += 1
    while i < len(lines) and not lines[i].startswith("diff --git "):
        i += 1  # the diffstat
    header = {"Subject": _PATCH_TAG.sub("", fields.get("Subject", ""), count=1).strip()}
    description = "\n".join(body).strip()
    if description:
        header["Description"] = description
    return {k: v for k, v in header.items() if v}, i


def _git_line_paths(name: str, line_no: int, line: str) -> tuple[str, str] | None:
    """The two names of a `diff --git A B` line (quoted or not), or None when it is ambiguous."""
    rest = line[len("diff --git "):]
    if rest.startswith('"'):
        first, rest = unquote(name, line_no, rest)
        rest = rest.lstrip(" ")
        second = unquote(name, line_no, rest)[0] if rest.startswith('"') else rest
        return first, second
    if rest.endswith('"'):
        at = rest.rfind(' "')
        return (rest[:at], unquote(name, line_no, rest[at + 1:])[0]) if at > 0 else None
    # unquoted: "a/NAME b/NAME" (the same name on both sides, as git writes a section without ---/+++)
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half] == " " and rest[:half][2:] == rest[half + 1:][2:]:
        return rest[:half], rest[half + 1:]
    return None


def _parse_file(name: str, lines: list[str], i: int) -> tuple[int, FilePatch]:
    start = i
    created = deleted = False
    mode = old_mode = None
    moved: dict[str, str | None] = {}  # rename/copy from and to
    copy = False
    index = ("", "")
    binary: BinaryChange | None = None
    if lines[i].startswith("diff --git "):
        i += 1
        while i < len(lines) and not lines[i].startswith("--- ") and not lines[i].startswith("diff --git "):
            meta = lines[i]
            created |= meta.startswith("new file mode ")
            if meta.startswith(("new file mode 100", "new mode 100")):
                mode = git_mode(meta)
            if meta.startswith("old mode 100"):
                old_mode = git_mode(meta)
            deleted |= meta.startswith("deleted file mode ")
            if re.match(r"(new file mode|new mode|old mode|deleted file mode) 120000", meta):
                raise _fail(name, i + 1, "the patch creates or changes a symlink; patches may only write regular files")
            found = re.match(r"(rename|copy) (from|to) (.*)", meta)
            if found:  # the similarity index is ignored, as git ignores it
                copy |= found.group(1) == "copy"
                written = found.group(3)  # the whole rest of the line (git quotes a name it cannot write plainly)
                plain = unquote(name, i + 1, written)[0] if written.startswith('"') else written
                moved[found.group(2)] = _clean_path(name, i + 1, plain, "", decoded=True)
            index_line = re.fullmatch(r"index ([0-9a-f]+)\.\.([0-9a-f]+)(?: [0-7]+)?", meta)
            if index_line:
                index = (index_line.group(1), index_line.group(2))
            if meta.startswith("Binary files "):
                raise _fail(name, i + 1, "a binary file's change without its data (\"Binary files ... differ\"): make "
                                         "the patch with `git diff --binary` (or format-patch, which includes it)")
            if meta == "GIT binary patch":
                i, binary = _parse_binary(name, lines, i + 1, index)
                continue
            i += 1
        if i >= len(lines) or lines[i].startswith("diff --git "):
            # git writes an empty file's creation or deletion, a mode change alone, a rename or copy
            # without changes and a binary patch without ---/+++ lines
            if moved:
                old, new = moved.get("from"), moved.get("to")
                if not old or not new:
                    raise _fail(name, start + 1, "a rename or copy needs both its from and to lines")
                return i, FilePatch(old, new, (), mode, old_mode, copy=copy, binary=binary)
            if not (created or deleted or mode is not None or binary is not None):
                raise _fail(name, start + 1, "a file section without ---/+++ lines, a new file or a mode change")
            both = _git_line_paths(name, start + 1, lines[start])
            if not both:
                raise _fail(name, start + 1, "cannot read the path of a section without ---/+++ lines")
            path = _clean_path(name, start + 1, both[1], "b/", decoded=True)
            return i, FilePatch(None if created else path, None if deleted else path, (), mode, old_mode,
                                binary=binary)
    if not lines[i].startswith("--- ") or i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
        raise _fail(name, i + 1, "expected '--- a/PATH' followed by '+++ b/PATH'")
    old = _clean_path(name, i + 1, lines[i][4:], "a/")
    new = _clean_path(name, i + 2, lines[i + 1][4:], "b/")
    if old is None and new is None:
        raise _fail(name, i + 1, "both sides are /dev/null")
    if old and new and old != new and (moved.get("from"), moved.get("to")) != (old, new):
        raise _fail(name, i + 1, f"the section's paths differ ({old} -> {new}) without rename or copy lines "
                                 "naming them")
    i += 2
    hunks = []
    while i < len(lines) and lines[i].startswith("@@"):
        i, hunk = _parse_hunk(name, lines, i)
        hunks.append(hunk)
    if not hunks:
        raise _fail(name, i + 1, f"no hunk for {new or old}")
    if i < len(lines) and not lines[i].startswith("diff --git ") and not lines[i].startswith("--- "):
        raise _fail(name, i + 1, f"unexpected line after the last hunk: {lines[i][:60]!r}")
    return i, FilePatch(old, new, tuple(hunks), mode, old_mode, copy=copy)


def _parse_binary(name: str, lines: list[str], i: int, index: tuple[str, str]) -> tuple[int, BinaryChange]:
    """The forward and reverse fragments after `GIT binary patch`, each `literal N`/`delta N`,
    its data lines, then a blank line."""
    fragments: list[Fragment] = []
    while i < len(lines) and len(fragments) < 2:
        head = re.fullmatch(r"(literal|delta) (\d+)", lines[i])
        if not head:
            break
        first = i
        i += 1
        data = []
        while i < len(lines) and lines[i]:
            data.append(lines[i])
            i += 1
        try:
            fragments.append(read_fragment(head.group(1), int(head.group(2)), data))
        except BinaryPatchError as exc:
            raise _fail(name, first + 1, f"the binary patch is damaged: {exc}") from None
        i += 1  # the blank line after the data
    if not fragments:
        raise _fail(name, i + 1, "GIT binary patch without a literal or delta fragment")
    if not all(re.fullmatch(r"[0-9a-f]{40}", h) for h in index):
        raise _fail(name, i, "a binary patch needs the full index line (40-hex ids), as git apply does: make it "
                             "with `git diff --binary --full-index` or format-patch")
    return i, BinaryChange(fragments[0], fragments[1] if len(fragments) > 1 else None, index[0], index[1])


def _parse_hunk(name: str, lines: list[str], i: int) -> tuple[int, Hunk]:
    match = _HUNK.fullmatch(lines[i])
    if not match:
        raise _fail(name, i + 1, f"malformed hunk header {lines[i][:60]!r}")
    old_start, old_len = int(match.group(1)), int(match.group(2) if match.group(2) is not None else 1)
    new_start, new_len = int(match.group(3)), int(match.group(4) if match.group(4) is not None else 1)
    header_line = i + 1
    i += 1
    body: list[tuple[str, str]] = []
    seen_old = seen_new = 0
    old_eof = new_eof = True
    while seen_old < old_len or seen_new < new_len:
        if i >= len(lines):
            raise _fail(name, header_line, f"hunk {lines[header_line - 1]} ends early "
                                           f"({seen_old}/{old_len} old, {seen_new}/{new_len} new lines)")
        line = lines[i]
        tag, content = (line[:1], line[1:]) if line else (" ", "")
        if tag not in " -+":
            raise _fail(name, i + 1, f"malformed hunk line {line[:60]!r} (hunk {lines[header_line - 1]} "
                                     f"promised {old_len} old and {new_len} new lines)")
        body.append((tag, content))
        seen_old += tag in " -"
        seen_new += tag in " +"
        i += 1
        if i < len(lines) and lines[i].startswith("\\"):
            if tag in " -" and seen_old == old_len:
                old_eof = False
            if tag in " +" and seen_new == new_len:
                new_eof = False
            i += 1
    if seen_old != old_len or seen_new != new_len:
        raise _fail(name, header_line, "hunk line counts do not match its header")
    return i, Hunk(old_start, old_len, new_start, new_len, match.group(5), tuple(body), old_eof, new_eof)
