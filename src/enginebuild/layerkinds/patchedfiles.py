"""Patches applied as files: a component built without them, and a layer holding exactly the
files they change, patched on the host by the code `patches check` runs.

The files are read from the component's own output (a wheel's members, its outputs tar) where
its build installed them verbatim (layerkinds/verbatim.py; checked again from their sha256 when
the layer is written), patched, and written where that output puts them, with the modes it
gives them; for a wheel, its RECORD as installing the patched wheel would write it. Written
from the store alone: no builder, and nothing of the chain below is read."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from enginebuild.core import keys
from enginebuild.core.keys import unkeyed
from enginebuild.errors import BuildFailed
from enginebuild.io.tarrules import clean_name
from enginebuild.layerkinds.base import INSTALL_WRITER, PATCH_WRITER, ComponentOutput, LayerPayload, WriteJob
from enginebuild.layerkinds.context import ContextItem, FromSource
from enginebuild.recipe.model import PatchRef
from enginebuild.sources.base import Context
from enginebuild.sources.globs import declared_matcher

if TYPE_CHECKING:
    from enginebuild.layerkinds.verbatim import Facts, OutputMember, Placed

if TYPE_CHECKING:
    from enginebuild.io.git import Mirrors
    from enginebuild.io.store import Store
    from enginebuild.io.tars import TarWriter


class NotVerbatim(BuildFailed):
    """A file a patch was routed for is not installed verbatim by the component's build (the fact
    is kept in the store): the plan stood on a routes file that did not know it, or said
    otherwise. `image` learns the routes before it builds (usecases/learning.py)."""

    def __init__(self, component: str, path: str, why: str):
        super().__init__(f"component {component}: {path} {why}",
                         hint="kept in this machine's store: `image` again writes it to the routes file beside the "
                              "lock (commit it) and puts the patch into the component's build")
        self.component, self.path = component, path


@dataclass(frozen=True)
class PatchedFiles(LayerPayload):
    writer: ClassVar[tuple[str, ...]] = (*INSTALL_WRITER, "layerkinds/verbatim.py", *PATCH_WRITER)
    component: str = field(metadata=unkeyed("its name, for messages: the files are its build's outputs "
                                            "(component_key), patched"))
    component_key: str  # its build, without these patches: what the facts are kept under
    patches: tuple[PatchRef, ...]  # applied as files, in stack order
    # the source tree that build received (the facts are learned from it)
    tree: ContextItem = field(metadata=unkeyed("read only to learn where the build installed each file: the build "
                                               "(component_key) made the bytes"))
    outputs_kind: str  # wheels | paths | prefix
    root: str = ""  # a prefix output's folder in the image
    site_packages: str = ""  # where a wheels output is installed
    interpreter: str = ""
    # the time stamps of that tree's entries
    epoch: int = field(default=0, metadata=unkeyed("read with that tree: the layer's own time stamps are the key's "
                                                   "epoch"))

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(sorted({f.path for p in self.patches for f in p.patch.files}))

    def write(self, job: WriteJob, writer: TarWriter) -> None:
        from enginebuild.layerkinds.installer import installed_record
        from enginebuild.layerkinds.verbatim import read_facts
        from enginebuild.patches.check import check_stack
        from enginebuild.patches.patched import stack_failure
        from enginebuild.sources.trees import FileMap

        record = job.outputs[self.component_key]
        facts = read_facts(job.store, self.component_key) or {}
        unknown = [path for path in self.paths if path not in facts]
        if unknown:
            facts = self.learn(job.store, job.image, record, facts, unknown, job.mirrors)
        found = self.originals(job, record, facts)
        originals = {path: found[facts[path][0].at] for path in self.paths}
        tree = FileMap({path: (data, placed.mode) for path, (placed, _, data) in originals.items()},
                      f"the outputs of component {self.component}")
        outcome = check_stack([p.patch for p in self.patches], tree)
        failure = outcome.first_failure
        if failure is not None:
            raise stack_failure(self.component, tree.description, failure, job.image)
        replaced: dict[str, dict[str, bytes]] = {}  # wheel -> member -> new bytes
        for path in self.paths:
            patched = outcome.files.get(path)
            if patched is None:
                raise BuildFailed(f"component {self.component}: a patch applied as files deletes {path}")
            for placed in facts[path]:
                _, member, _ = found[placed.at]
                self.put(writer, placed, member, patched)
                if placed.wheel:
                    replaced.setdefault(placed.wheel, {})[placed.at] = patched
        self.drop_stale_bytecode(job, record, facts, writer)
        wheels = {filename: sha for filename, sha, _ in record.wheels}
        for filename, members in sorted(replaced.items()):
            where, data = installed_record(job.store.whole(wheels[filename], filename), filename,
                                           self.site_packages, self.interpreter, members)
            writer.add_bytes(where, data, 0o644)

    def originals(self, job: WriteJob, record: ComponentOutput,
                  facts: Facts) -> dict[str, tuple[Placed, OutputMember, bytes]]:
        """Each place the build installed a patched file at, with its member and bytes, checked
        against what was learnt of it (a fact that no longer holds is forgotten, and named)."""
        from enginebuild.layerkinds.verbatim import forget

        wanted = {p.at: path for path in self.paths for p in facts.get(path, ())}
        for path in self.paths:
            if not facts.get(path):
                raise NotVerbatim(self.component, path, "is not installed verbatim by its build (its bytes are in "
                                                        "no file of its outputs)")
        found: dict[str, tuple[Placed, OutputMember, bytes]] = {}
        for member in self.members(job.store, record, set(wanted)):
            path = wanted[member.at]
            placed = next(p for p in facts[path] if p.at == member.at and p.wheel == member.wheel)
            data = member.read()
            if keys.sha(data) != placed.sha256:
                forget(job.store, self.component_key, facts, path)
                raise NotVerbatim(self.component, path, f"is not what its build installed at {member.at}")
            found[member.at] = (placed, member, data)
        for path in self.paths:
            missing = [p.at for p in facts[path] if p.at not in found]
            if missing:
                forget(job.store, self.component_key, facts, path)
                raise NotVerbatim(self.component, path, f"is not in its outputs at {missing[0]}")
        return found

    def drop_stale_bytecode(self, job: WriteJob, record: ComponentOutput, facts: Facts, writer: TarWriter) -> None:
        """Whiteouts for the bytecode the output holds of each patched `.py` (`__pycache__/NAME.*.pyc`
        beside it, a wheel's or the outputs tar's): a timestamp pyc of a copy that kept its time and
        size would run the unpatched code."""
        placed = [p for path in self.paths for p in facts[path] if p.at.endswith(".py")]
        if not placed:
            return
        members = [(m.wheel, m.at) for m in self.members(job.store, record) if m.at.endswith(".pyc")]
        for each in placed:
            folder, _, base = each.at.rpartition("/")
            cache = f"{folder}/__pycache__" if folder else "__pycache__"
            for wheel, name in members:
                pyc_folder, _, pyc = name.rpartition("/")
                if wheel == each.wheel and pyc_folder == cache and pyc.startswith(base[:-3] + "."):
                    whiteout = f"{cache}/.wh.{pyc}"
                    writer.add_bytes(f"{self.site_packages.strip('/')}/{whiteout}" if wheel
                                     else self.output_path(whiteout), b"", 0o644)

    def image_path(self, placed: Placed) -> str:
        """Where the image holds a file placed so (no leading /)."""
        if placed.wheel:
            return f"{self.site_packages.strip('/')}/{placed.at}"
        return self.output_path(placed.at)

    def output_path(self, at: str) -> str:
        """Where the image holds a member of the outputs tar."""
        return f"{clean_name(self.root)}/{at}" if self.root else at

    def put(self, writer: TarWriter, placed: Placed, member: OutputMember, data: bytes) -> None:
        if placed.wheel:
            writer.add_bytes(self.image_path(placed), data, placed.mode)
            return
        assert member.info is not None
        info = _renamed(member.info, self.image_path(placed))
        info.size = len(data)
        writer.add_member(info, io.BytesIO(data))

    def members(self, store: Store, record: ComponentOutput, wanted: set[str] | None = None) -> Iterable[OutputMember]:
        from enginebuild.layerkinds.verbatim import tar_members, wheel_members

        if self.outputs_kind == "wheels":
            for filename, sha, _ in sorted(record.wheels):
                for member in wheel_members(store.whole(sha, filename), filename):
                    if wanted is None or member.at in wanted:
                        yield member
            return
        for member in tar_members(store.whole(record.sha256, f"outputs of {self.component}")):
            if wanted is None or member.at in wanted:
                yield member

    def learn(self, store: Store, image: str, record: ComponentOutput, known: Facts,
              paths: list[str], mirrors: Mirrors = ()) -> dict[str, tuple[Placed, ...]]:
        """Whether the build installs `paths` verbatim (and where), from the tree it was given and
        what it made, added to what is `known` and kept."""
        from enginebuild.layerkinds.verbatim import keep_facts, learn, same_names, source_files
        from enginebuild.patches.check import check_stack
        from enginebuild.patches.patched import patched_tree, stack_failure

        origin = self.tree.origin
        assert isinstance(origin, FromSource)
        ctx = Context(store.home, mtime=self.epoch, mirrors=mirrors)
        pristine = origin.source.tree(ctx)
        listing = pristine.listing()
        if listing is None:  # a tree that cannot list its files: every file of the tree, from its tar
            tree = patched_tree(ctx, self.tree.label or self.component, origin.source, origin.patches,
                                self.tree.digest, image, origin.only)
            names = {m.at.rsplit("/", 1)[-1] for m in self.members(store, record)}
            sources = source_files(store.whole(tree.sha256, f"source tree of component {self.component}"),
                                   lambda p: p.rsplit("/", 1)[-1] in names)
        else:  # the files named as `paths` are, as the build received them (its patches applied, its inputs)
            changed: dict[str, bytes | None] = {}
            if origin.patches:
                outcome = check_stack([p.patch for p in origin.patches], pristine)
                if outcome.first_failure is not None:
                    raise stack_failure(self.component, pristine.description, outcome.first_failure, image)
                changed = outcome.files
            declared = declared_matcher(origin.only)
            present = (set(listing) - {p for p, data in changed.items() if data is None}) | \
                {p for p, data in changed.items() if data is not None}
            wanted = [p for p in same_names(present, paths) if declared(p)]
            read = pristine.read_many([p for p in wanted if p not in changed])
            sources = {}
            for path in wanted:
                data = changed[path] if path in changed else read[path]
                if data is not None:
                    sources[path] = (len(data), keys.sha(data))
        facts = {**known, **{path: () for path in paths}, **learn(sources, self.members(store, record))}
        keep_facts(store, self.component_key, facts)
        return facts

    def patched_files(self) -> PatchedFiles:
        return self

    def made_by(self) -> str:
        return self.component_key

    def describe(self, name: str, folder: str) -> str:
        names = ", ".join(p.name.rsplit("/", 1)[-1] for p in self.patches)
        return f"# enginebuild: {names} applied as files to what component {self.component} installs ({len(self.paths)} file(s))"

    def python_site(self) -> tuple[str, str] | None:
        return (self.interpreter, self.site_packages) if self.site_packages else None


def _renamed(info: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    copy = tarfile.TarInfo(name)
    copy.mode, copy.uid, copy.gid, copy.type = info.mode, info.uid, info.gid, tarfile.REGTYPE
    copy.pax_headers = dict(info.pax_headers)
    return copy

