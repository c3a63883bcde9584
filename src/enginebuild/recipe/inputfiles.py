"""The files a spec's plan reads, for the no-op memo (state/memo.py) to watch: the files `files:`
copies and the folders that list them (those a file edit may remake alone, fastedit.py), and
every other file whose change could change the plan (the spec's chain, its lock and routes file,
its patches and their checks, build scripts, step files, sources' watched paths, the templates)."""

from __future__ import annotations

from pathlib import Path

from enginebuild.recipe.model import ImageSpec


def copied_paths(root: Path, spec: ImageSpec) -> list[Path]:
    """The files `files:` copies and the folders that list them (a file added to a glob's folder)."""
    paths = []
    for group in spec.files:
        folder = (root / group.where.file).parent
        paths.append(folder)
        real = folder.resolve()
        for entry in group.entries:
            if entry.src is None:
                continue
            paths.append(entry.src)
            paths += [p for p in entry.src.parents if real in p.parents]  # the folders between
    return paths


def other_input_paths(root: Path, spec: ImageSpec, templates: Path) -> list[Path]:
    """Every other file and folder whose change could change the plan of this spec."""
    paths = [root / "images" / name / "image.yaml" for name in spec.chain]
    paths += [root / "lockfiles" / f"{spec.lock_name}.lock", root / "lockfiles" / f"{spec.lock_name}.routes.json",
              root / "enginebuild.yaml"]
    paths += [p.path for _, p in spec.all_patches]
    paths += [p.checks_file for _, p in spec.all_patches]  # what `image` runs in the image it built
    sources = []
    for comp in spec.components:
        if comp.build.script is not None and comp.build.script.src is not None:
            paths.append(comp.build.script.src)
        sources += ([comp.source] if comp.source else []) + [e.source for e in comp.sources]
    sources += [o.source for o in spec.overlays]
    steps = [*spec.steps, *(step for comp in spec.components for step in comp.steps)]
    paths += [f.src for step in steps for f in step.files if f.src is not None]
    for source in sources:
        paths += source.watched_paths()
    paths.append(templates)
    paths += sorted(templates.iterdir())
    return paths
