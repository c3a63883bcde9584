"""A source tree with its patch stack applied on the host, by the code `patches check` runs,
so what a build compiles is exactly what the check verified."""

from __future__ import annotations

import io
import tarfile

from enginebuild.errors import BuildFailed, command
from enginebuild.io.store import Blob, HashingWriter, make_blob
from enginebuild.io.tarrules import clean_name
from enginebuild.io.tars import TarWriter
from enginebuild.patches.check import PatchResult, check_stack
from enginebuild.recipe.model import PatchRef
from enginebuild.sources import Pinned
from enginebuild.sources.base import Context
from enginebuild.sources.globs import declared_matcher


def stack_failure(owner: str, description: str, result: PatchResult, hint_image: str) -> BuildFailed:
    return BuildFailed(f"patch {result.name} does not apply to {owner} {description} ({result.status}): "
                       f"{result.detail}",
                       hint=f"`{command()} patches check {hint_image}` shows what the source has instead")


def patched_tree(ctx: Context, owner: str, source: Pinned, patches: tuple[PatchRef, ...], key: str,
                 image: str, only: tuple[str, ...] = ()) -> Blob:
    """The normalised tree tar of `source` with `patches` applied, derived once and recorded by
    `key`; with declared inputs `only` (globs), holding just the files they match."""
    base = source.tree_tar(ctx)
    if not patches and not only:
        return base
    declared = declared_matcher(only)

    def make() -> Blob:
        tree = source.tree(ctx)
        outcome = check_stack([p.patch for p in patches], tree)
        failure = outcome.first_failure
        if failure is not None:
            raise stack_failure(owner, tree.description, failure, image)

        def write(sink: HashingWriter) -> None:
            writer = TarWriter(sink, mtime=ctx.mtime, implied_dirs=bool(only))
            seen = set()
            with tarfile.open(ctx.store.verified(base.sha256, f"tree of {owner}"), "r:") as tar:
                for member in tar:
                    name = clean_name(member.name)
                    if only and (member.isdir() or not declared(name)):
                        seen.add(name)
                        continue  # not a declared input: absent from the build
                    if name in outcome.files:
                        seen.add(name)
                        data = outcome.files[name]
                        if data is None:
                            continue  # deleted by the stack
                        member.size = len(data)
                        member.mode = outcome.modes.get(name, member.mode)
                        writer.add_member(member, io.BytesIO(data))
                    else:
                        writer.add_member(member, tar.extractfile(member) if member.isreg() else None)
            for name in sorted(set(outcome.files) - seen):
                data = outcome.files[name]
                if data is not None and declared(name):
                    writer.add_bytes(name, data, outcome.modes.get(name, 0o644))
            writer.close()

        return make_blob(ctx.store, f"patched tree of {owner}", write)

    return ctx.store.derived("patched", key, f"patched tree of {owner}", make)
