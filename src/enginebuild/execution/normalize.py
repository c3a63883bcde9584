"""Rewriting a layer a command wrote (BuildKit) to the rules of every layer enginebuild writes.

Entries are sorted (a hard link always after the file it names), every time stamp is the
epoch, owner names and PAX times go, numeric owners and modes stay. Build leftovers that
differ from run to run and that nothing needs are dropped: package manager caches and
logs, /tmp, bytecode caches and the mount points the build used (the engine leaves an empty
file or folder where it mounted a step's files or script under /opt/enginebuild). Whiteouts
(deletions) are kept as they are: they mean something.
"""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

from enginebuild.io.tarrules import KEEP_DIRS, clean_name, dropped
from enginebuild.io.tars import TarWriter

MOUNTS = "opt/enginebuild"  # where a command's own files are mounted (plan/envs.py), never kept


def mount_stubs(members: list[tarfile.TarInfo]) -> set[str]:
    """The entries under MOUNTS that are mount points left behind: empty files, and folders with
    nothing else under them (a whiteout, or a file with bytes, is kept with its folders)."""
    under = [m for m in members if m.name == MOUNTS or m.name.startswith(MOUNTS + "/")]
    kept = {m.name for m in under if m.name.rsplit("/", 1)[-1].startswith(".wh.")
            or not (m.isdir() or (m.isreg() and m.size == 0))}
    folders = {name.rsplit("/", i)[0] for name in kept for i in range(1, name.count("/") + 1)}
    return {m.name for m in under if m.name not in kept and m.name not in folders}


@dataclass
class Normalized:
    entries: int
    dropped: list[str]


def normalize_layer(source: Path, writer: TarWriter) -> Normalized:
    with tarfile.open(source, "r:") as tar:
        members = []
        gone = []
        left: dict[str, tarfile.TarInfo] = {}  # dropped files, by name: a hard link may still name one
        for member in tar.getmembers():
            name = clean_name(member.name)
            if not name:
                continue
            if dropped(name) and name not in KEEP_DIRS:
                gone.append(name)
                left[name] = member
                continue
            member.name = name
            members.append(member)
        stubs = mount_stubs(members)
        gone += sorted(stubs)
        members = [m for m in members if m.name not in stubs]
        members.sort(key=lambda m: m.name)
        names = {m.name for m in members}
        # a hard link must follow the file it names: the first of a group in sorted order carries the data;
        # a link to a file dropped here (a build's /tmp) carries that file's data itself
        groups: dict[str, list[tarfile.TarInfo]] = {}
        for m in members:
            if m.islnk():
                groups.setdefault(clean_name(m.linkname), []).append(m)
        carrier: dict[str, str] = {}
        for target, links in groups.items():
            if target in names or (target in left and left[target].isreg()):
                carrier[target] = min(([target] if target in names else []) + [m.name for m in links])
        by_name = {**left, **{m.name: m for m in members}}
        for m in members:
            if m.islnk():
                target = clean_name(m.linkname)
                first = carrier.get(target, target)
                if first == m.name:  # this link becomes the file
                    original = by_name[target]
                    info = tarfile.TarInfo(m.name)
                    info.type, info.size, info.mode = tarfile.REGTYPE, original.size, original.mode
                    info.uid, info.gid, info.pax_headers = original.uid, original.gid, original.pax_headers
                    writer.add_member(info, tar.extractfile(original))
                    continue
                m.linkname = first
                writer.add_member(m, None)
            elif m.isreg() and carrier.get(m.name, m.name) != m.name:
                link = tarfile.TarInfo(m.name)
                link.type, link.linkname, link.mode = tarfile.LNKTYPE, carrier[m.name], m.mode
                link.uid, link.gid = m.uid, m.gid
                writer.add_member(link, None)
            else:
                writer.add_member(m, tar.extractfile(m) if m.isreg() else None)
    return Normalized(len(members), gone)


