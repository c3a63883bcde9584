#!/usr/bin/env python3
"""Record what `git apply` does with each synthetic patch case: the corpus the patch applier
is held to (tests/test_patch_corpus.py).

Each case has a base tree, the change made to it (from which `git diff` writes the patch,
with the context it asks for) and the tree the patch is then applied to (upstream moved).
For each, this script runs real `git diff` and `git apply` in scratch folders and writes
what git did: whether the patch applied, and every file's bytes and mode afterwards.

    python3 scripts/record-patch-corpus.py            # re-record tests/corpus/patches.json
    python3 scripts/record-patch-corpus.py --check    # exit 1 if git now disagrees with the file
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "corpus" / "patches.json"

LINES = [f"line {i}" for i in range(1, 31)]
IMPORTS = ["import os", "import sys", "", "def main():", "    return 0", ""]


def text(lines: list[str], newline: bool = True, eol: str = "\n") -> str:
    return eol.join(lines) + (eol if newline and lines else "")


def body(lines: list[str]) -> str:
    return text(lines)


def replace(lines: list[str], index: int, new: list[str], count: int = 1) -> list[str]:
    return lines[:index] + new + lines[index + count:]


def case(name: str, why: str, base: dict, change: dict, target: dict | None = None, context: int = 3,
         modes: dict | None = None, change_modes: dict | None = None, target_modes: dict | None = None,
         patch: str | None = None, diff: tuple[str, ...] = ("--no-renames",)) -> dict:
    """base/change/target map a path to its text (None: absent). target defaults to base. `diff`:
    how git diff writes the patch (renames and copies found with -M/-C, binary data with --binary)."""
    return {"name": name, "why": why, "base": base, "change": change, "target": base if target is None else target,
            "context": context, "modes": modes or {}, "change_modes": change_modes or {},
            "target_modes": target_modes if target_modes is not None else (modes or {}), "patch": patch,
            "diff": list(diff)}


BLOB = "".join(chr((i * 37 + i // 7) % 256) for i in range(4096))  # bytes with NULs: git calls the file binary
SMALL_BLOB = "\x00\x01\x02binary\x00"
RENAME = ("-M",)
COPY = ("-C", "--find-copies-harder")
BINARY = ("--binary", "--no-renames")


def moves_and_binaries() -> list[dict]:
    """Renames and copies (as format-patch -M/-C writes them), git binary patches (literal and
    delta), and names git quotes."""
    f, g = "src/mod.py", "src/moved.py"
    base = {f: body(LINES)}
    edited = body(replace(LINES, 14, ["line 15 changed"]))
    return [
        case("rename-pure", "a file moved, unchanged (similarity 100%)", base, {g: body(LINES)}, diff=RENAME),
        case("rename-with-change", "a file moved and edited", base, {g: edited}, diff=RENAME),
        case("rename-with-change-offset", "moved and edited; upstream added lines above the hunk", base, {g: edited},
             {f: body(["up 1", "up 2"] + LINES)}, diff=RENAME),
        case("rename-source-changed", "moved and edited; upstream changed the hunk's context", base, {g: edited},
             {f: body(replace(LINES, 13, ["line 14 upstream"]))}, diff=RENAME),
        case("rename-onto-existing", "the rename's target exists upstream: git refuses", base, {g: edited},
             {**base, g: body(["theirs"])}, diff=RENAME),
        case("rename-source-missing", "the file to move is gone upstream", {**base, "keep.py": body(["k"])},
             {g: edited, "keep.py": body(["k"])}, {"keep.py": body(["k"])}, diff=RENAME),
        case("rename-with-mode", "moved, edited and made executable", base, {g: edited}, change_modes={g: 0o755},
             diff=RENAME),
        case("rename-keeps-mode", "an executable moved keeps its mode", base, {g: body(LINES)}, modes={f: 0o755},
             change_modes={g: 0o755}, diff=RENAME),
        case("copy-with-change", "a file copied and the copy edited", base, {f: body(LINES), g: edited}, diff=COPY),
        case("copy-pure", "a file copied unchanged", base, {f: body(LINES), g: body(LINES)}, diff=COPY),
        case("copy-onto-existing", "the copy's target exists upstream", base, {f: body(LINES), g: edited},
             {**base, g: body(["theirs"])}, diff=COPY),
        case("binary-new", "a new binary file (literal)", base, {**base, "data/w.bin": SMALL_BLOB}, diff=BINARY),
        case("binary-new-exists", "a new binary file that upstream has added", base,
             {**base, "data/w.bin": SMALL_BLOB}, {**base, "data/w.bin": "\x00theirs"}, diff=BINARY),
        case("binary-delta", "a binary file changed in a few bytes (a delta)", {"data/w.bin": BLOB},
             {"data/w.bin": BLOB[:2000] + "\x00CHANGED\x00" + BLOB[2009:]}, diff=BINARY),
        case("binary-literal", "a small binary file rewritten (a literal)", {"data/w.bin": SMALL_BLOB},
             {"data/w.bin": "\x00\xff\xfe other"}, diff=BINARY),
        case("binary-deleted", "a binary file removed", {**base, "data/w.bin": BLOB}, base, diff=BINARY),
        case("binary-preimage-differs", "the binary file changed upstream: its blob id differs",
             {"data/w.bin": BLOB}, {"data/w.bin": BLOB[:2000] + "\x00CHANGED\x00" + BLOB[2009:]},
             {"data/w.bin": BLOB[:100] + "\x00upstream" + BLOB[109:]}, diff=BINARY),
        case("binary-without-data", "\"Binary files differ\" without --binary: nothing to apply",
             {"data/w.bin": BLOB}, {"data/w.bin": BLOB[:2000] + "\x00CHANGED\x00" + BLOB[2009:]}),
        case("quoted-utf8-path", "a name git quotes (not ASCII)", {"src/caf\u00e9.py": body(LINES)},
             {"src/caf\u00e9.py": edited}),
        case("quoted-new-file", "a new file with a space and accents in its name", base,
             {**base, "docs/na\u00efve notes.md": body(["# notes"])}),
        case("quoted-rename", "a rename to a quoted name", base, {"src/m\u00f6d.py": edited}, diff=RENAME),
    ]


def cases() -> list[dict]:
    f = "src/mod.py"
    base = {f: body(LINES)}
    edit = {f: body(replace(LINES, 14, ["line 15 changed"]))}
    top = {f: body(IMPORTS)}
    out = [
        case("exact", "the source is the one the patch was made against", base, edit),
        case("offset-down", "upstream added three lines above the hunk", base, edit,
             {f: body(["new a", "new b", "new c"] + LINES)}),
        case("offset-up", "upstream removed two lines above the hunk", base, edit, {f: body(LINES[2:])}),
        case("large-offset", "two hundred lines added above", base, edit,
             {f: body([f"pad {i}" for i in range(200)] + LINES)}),
        case("context-changed", "a context line differs: no fuzz", base, edit,
             {f: body(replace(LINES, 12, ["line 13 upstream"]))}),
        case("whitespace-differs", "a context line gained a trailing space", base, edit,
             {f: body(replace(LINES, 13, ["line 14 "]))}),
        case("tab-vs-spaces", "a context line's indentation differs", {f: body(["\tx = 1"] + LINES)},
             {f: body(["\tx = 1"] + replace(LINES, 1, ["line 2 changed"]))},
             {f: body(["    x = 1"] + LINES)}),
        case("already-applied", "the source has the change already", base, edit, edit),
        case("equidistant-later-wins", "the hunk fits one line below and one above where it says",
             {f: body(["a", "b", "c", "x", "y", "z", "d", "e", "f"])},
             {f: body(["a", "b", "c", "x", "Y", "z", "d", "e", "f"])},
             {f: body(["q", "x", "y", "z", "m", "x", "y", "z", "q"])}, context=1),
        case("nearer-above-wins", "the hunk's context appears once near above, once far below",
             {f: body(["k1", "k2", "x", "y", "z", "k3"] + [f"p{i}" for i in range(10)])},
             {f: body(["k1", "k2", "x", "Y", "z", "k3"] + [f"p{i}" for i in range(10)])},
             {f: body(["x", "y", "z", "k1", "k2", "k3"] + [f"p{i}" for i in range(10)] + ["x", "y", "z"])},
             context=1),
        case("line1-with-context-moved", "a hunk at line 1 must match at the file's start: upstream added a line",
             top, {f: body(["import os", "import re", "import sys", "", "def main():", "    return 0", ""])},
             {f: body(["# header"] + IMPORTS)}),
        case("line1-with-context-same", "a hunk at line 1 on the unchanged file", top,
             {f: body(["import os", "import re", "import sys", "", "def main():", "    return 0", ""])}),
        case("line1-insert-top-moved", "a hunk inserting at the top, upstream added a line above",
             top, {f: body(["# patched"] + IMPORTS)}, {f: body(["#!/usr/bin/env python3"] + IMPORTS)}),
        case("line1-insert-top-same", "a hunk inserting at the top of the unchanged file",
             top, {f: body(["# patched"] + IMPORTS)}),
        case("add-to-empty-file", "@@ -0,0 @@ on the empty file it was made for", {f: ""}, {f: body(["a", "b"])}),
        case("add-to-empty-file-not-empty", "@@ -0,0 @@ on a file that is no longer empty", {f: ""},
             {f: body(["a", "b"])}, {f: body(["upstream"])}),
        case("end-hunk-same", "a hunk at the end of the file, nothing after it", base,
             {f: body(LINES + ["line 31"])}),
        case("end-hunk-appended", "a hunk without trailing context; upstream appended lines", base,
             {f: body(LINES + ["line 31"])}, {f: body(LINES + ["more 1", "more 2"])}),
        case("end-hunk-shifted", "a hunk at the end; upstream added lines above only", base,
             {f: body(LINES + ["line 31"])}, {f: body(["top"] + LINES)}),
        case("below-previous-hunk", "the second hunk's only match is now above the first hunk's",
             {f: body([f"a{i}" for i in range(20)] + ["mark1"] + [f"b{i}" for i in range(20)] + ["mark2"]
                      + [f"c{i}" for i in range(20)])},
             {f: body([f"a{i}" for i in range(20)] + ["MARK1"] + [f"b{i}" for i in range(20)] + ["MARK2"]
                      + [f"c{i}" for i in range(20)])},
             {f: body([f"b{i}" for i in range(16, 20)] + ["mark2"] + [f"c{i}" for i in range(4)]
                      + [f"a{i}" for i in range(20)] + ["mark1"] + [f"b{i}" for i in range(4)]
                      + [f"x{i}" for i in range(30)])}),
        case("two-hunks-two-offsets", "two hunks, each moved by a different amount",
             {f: body(LINES + [f"tail {i}" for i in range(20)])},
             {f: body(replace(LINES, 4, ["line 5 changed"]) + replace([f"tail {i}" for i in range(20)], 14,
                                                                       ["tail 14 changed"]))},
             {f: body(["up"] + LINES + ["mid 1", "mid 2", "mid 3"] + [f"tail {i}" for i in range(20)])}),
        case("stated-match-gone-other-kept", "two identical regions; the one at the stated line was removed",
             {f: body(["r1", "x", "y", "z", "r2"] + [f"p{i}" for i in range(8)] + ["x", "y", "z", "r3"])},
             {f: body(["r1", "x", "Y", "z", "r2"] + [f"p{i}" for i in range(8)] + ["x", "y", "z", "r3"])},
             {f: body(["r1", "r2"] + [f"p{i}" for i in range(8)] + ["x", "y", "z", "r3"])}, context=1),
        case("unidiff-zero-same", "a -U0 hunk in the middle of the unchanged file", base, edit, context=0),
        case("unidiff-zero-moved", "a -U0 hunk, upstream added lines above", base, edit,
             {f: body(["up"] + LINES)}, context=0),
        case("unidiff-zero-at-end", "a -U0 hunk changing the last line", base,
             {f: body(LINES[:-1] + ["line 30 changed"])}, context=0),
        case("unidiff-zero-insert", "a -U0 pure insertion in the middle", base,
             {f: body(LINES[:10] + ["inserted"] + LINES[10:])}, context=0),
        case("unidiff-one", "one line of context", base, edit, {f: body(["up"] + LINES)}, context=1),
        case("insert-with-context-moved", "a pure insertion with context, moved", base,
             {f: body(LINES[:10] + ["inserted"] + LINES[10:])}, {f: body(["u1", "u2"] + LINES)}),
        case("crlf-both", "a CRLF file patched with a CRLF patch", {f: text(LINES, eol="\r\n")},
             {f: text(replace(LINES, 14, ["line 15 changed"]), eol="\r\n")}),
        case("crlf-target-lf-patch", "an LF patch against a file that became CRLF", base, edit,
             {f: text(LINES, eol="\r\n")}),
        case("no-newline-append", "the file had no final newline; the patch appends a line",
             {f: text(LINES, newline=False)}, {f: text(LINES + ["line 31"], newline=False)}),
        case("add-final-newline", "the patch adds the final newline", {f: text(LINES, newline=False)},
             {f: text(LINES)}),
        case("remove-final-newline", "the patch removes the final newline", base, {f: text(LINES, newline=False)}),
        case("expects-newline-target-lacks", "the patch expects a final newline the source lost", base,
             {f: body(LINES[:-1] + ["line 30 changed"])}, {f: text(LINES, newline=False)}),
        case("expects-no-newline-target-has", "the patch expects no final newline; the source has one",
             {f: text(LINES, newline=False)}, {f: text(LINES[:-1] + ["line 30 changed"], newline=False)},
             {f: text(LINES)}),
        case("create-file", "a new file", base, {**base, "src/new.py": body(["print('new')"])}),
        case("create-file-exists", "a new file that upstream has since added", base,
             {**base, "src/new.py": body(["print('new')"])}, {**base, "src/new.py": body(["print('theirs')"])}),
        case("create-empty-file", "a new empty file", base, {**base, "src/empty.py": ""}),
        case("create-executable", "a new executable script", base, {**base, "run.sh": body(["#!/bin/sh", "exit 0"])},
             change_modes={"run.sh": 0o755}),
        case("delete-file", "a file removed", {**base, "old.py": body(["gone"])}, base),
        case("delete-file-changed", "a file removed, but upstream changed it", {**base, "old.py": body(["gone"])},
             base, {**base, "old.py": body(["gone", "and more"])}),
        case("delete-empty-file", "an empty file removed", {**base, "empty.py": ""}, base),
        case("mode-and-content", "a script made executable and edited", {f: body(LINES)}, edit,
             change_modes={f: 0o755}),
        case("mode-only", "a script made executable, nothing else", {f: body(LINES)}, {f: body(LINES)},
             change_modes={f: 0o755}),
        case("mode-removed-and-content", "an executable made a plain file and edited", {f: body(LINES)}, edit,
             modes={f: 0o755}, change_modes={f: 0o644}),
        case("two-files-second-fails", "one of two files conflicts: nothing is applied",
             {**base, "b.py": body(["b1", "b2", "b3"])}, {**edit, "b.py": body(["b1", "B2", "b3"])},
             {**base, "b.py": body(["b1", "other", "b3"])}),
        case("latin1-bytes", "a file and patch that are not UTF-8", {f: "caf\xe9\n" + body(LINES)},
             {f: "caf\xe9\n" + body(replace(LINES, 14, ["line 15 ch\xe4nged"]))}),
        case("empty-target-with-context", "a patch with context against a file upstream emptied", base, edit,
             {f: ""}),
        case("search-clamps-at-start", "the stated line is far past a shortened file", base,
             {f: body(replace(LINES, 24, ["line 25 changed"]))}, {f: body(LINES[20:])}),
        case("same-file-twice", "two sections for one file apply one after the other", base, edit,
             patch=None),
    ]
    return out + moves_and_binaries()


def run(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", HOME=str(cwd), LC_ALL="C")
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, check=check)


def write_tree(root: Path, files: dict, modes: dict) -> None:
    for path, content in files.items():
        if content is None:
            continue
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(content.encode("latin-1") if isinstance(content, str) else content)
        full.chmod(modes.get(path, 0o644))


def read_tree(root: Path) -> dict:
    out = {}
    for full in sorted(root.rglob("*")):
        if full.is_file() and ".git" not in full.relative_to(root).parts:
            rel = full.relative_to(root).as_posix()
            out[rel] = {"b64": base64.b64encode(full.read_bytes()).decode(),
                        "mode": "755" if full.stat().st_mode & 0o111 else "644"}
    return out


def make_patch(spec: dict, scratch: Path) -> str:
    repo = scratch / "repo"
    repo.mkdir()
    run(["git", "init", "-q"], repo)
    run(["git", "config", "core.fileMode", "true"], repo)
    write_tree(repo, spec["base"], spec["modes"])
    run(["git", "add", "-A"], repo)
    run(["git", "-c", "user.name=c", "-c", "user.email=c@c", "commit", "-q", "-m", "base", "--allow-empty"], repo)
    for path in spec["base"]:
        if path not in spec["change"] or spec["change"][path] is None:
            (repo / path).unlink()
    write_tree(repo, spec["change"], {**spec["modes"], **spec["change_modes"]})
    run(["git", "add", "-A"], repo)
    diff = run(["git", "diff", "--cached", "--no-color", *spec["diff"], f"-U{spec['context']}"], repo).stdout
    return diff.decode("latin-1")


def record(spec: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        patch = make_patch(spec, scratch)
        if spec["name"] == "same-file-twice":  # git diff never writes this; split the one section in two
            head, _, hunk = patch.partition("@@")
            first = "@@" + hunk
            second = first.replace("-line 15\n+line 15 changed", " line 15 changed").replace(
                " line 16\n", "-line 16\n+line 16 twice\n", 1)
            patch = head + first + head.split("index")[0] + "--- a/src/mod.py\n+++ b/src/mod.py\n" + second
        target = scratch / "target"
        target.mkdir()
        write_tree(target, spec["target"], spec["target_modes"])
        (scratch / "p.diff").write_bytes(patch.encode("latin-1"))
        done = run(["git", "apply", "--whitespace=nowarn", str(scratch / "p.diff")], target, check=False)
        return {"name": spec["name"], "why": spec["why"], "patch": patch,
                "files": read_tree_from(spec["target"], spec["target_modes"]),
                "git": {"applies": done.returncode == 0, "files": read_tree(target),
                        "message": done.stderr.decode("latin-1").strip()}}


def read_tree_from(files: dict, modes: dict) -> dict:
    return {p: {"b64": base64.b64encode(c.encode("latin-1")).decode(), "mode": f"{modes.get(p, 0o644):o}"}
            for p, c in sorted(files.items()) if c is not None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare git now with the recorded file")
    args = parser.parse_args()
    version = run(["git", "--version"], ROOT).stdout.decode().strip()
    recorded = {"git": version, "cases": [record(c) for c in cases()]}
    if args.check:
        old = json.loads(OUT.read_text())
        bad = [n["name"] for n, o in zip(recorded["cases"], old["cases"], strict=True)
               if (n["git"]["applies"], n["git"]["files"]) != (o["git"]["applies"], o["git"]["files"])]
        print(f"{len(recorded['cases'])} cases, {len(bad)} differ from {OUT.name}: {', '.join(bad) or '-'}")
        return 1 if bad else 0
    OUT.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(recorded['cases'])} cases with {version} into {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
