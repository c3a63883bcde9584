"""Component nodes: what BuildKit builds for a component, and the key covering exactly its inputs.

A component's key covers its sources (and their pins), its patch stack, its build script,
args, cache and secret names, steps, the environment it builds on and the keys of the
components it needs: nothing of the runtime image or of other components.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from enginebuild.core import keys
from enginebuild.errors import SpecError
from enginebuild.io.recipefiles import read_recipe_file
from enginebuild.layerkinds.context import ContextItem, FromBlob, FromData, FromFile, FromOutput, FromSource
from enginebuild.lock.inputs import release_input
from enginebuild.plan.envs import SCRIPT, STEP_FILES, EnvPlanner, mounts, parent_ref, script_run
from enginebuild.plan.model import ComponentNode, EnvNode
from enginebuild.plan.render import TEMPLATES, render
from enginebuild.plan.routes import Facts, FactsReader, Route, no_facts, route_patches
from enginebuild.plan.writers import COMPONENT_WRITER, SOURCE_TREE_WRITER, code_digest
from enginebuild.recipe.model import Component, OutputsKind, PatchRef
from enginebuild.sources import Pinned
from enginebuild.sources.globs import declared_matcher
from enginebuild.wire import JsonDoc

SOURCES = "/opt/enginebuild/sources"
DEPS = "/opt/enginebuild/deps"
CACHE_IN = "/opt/enginebuild/compiler-cache-in"  # a seed of each build.cache folder, from an earlier build
CACHE_OUT = "/opt/enginebuild/compiler-cache-out"  # each build.cache folder after the build, to be carried
CACHE_MAX_KB = 4 << 20  # a folder larger than this (4 GiB) is not carried
SRC = "/opt/enginebuild/src"  # where the source is built, unless the tree is kept (an editable output)
EDITABLE_WHEELS = "/opt/enginebuild/editable-wheel"  # the editable wheel of a kept tree
EDITABLE_HOOK = TEMPLATES / "editable_wheel.py"


def cache_scripts(folders: tuple[str, ...]) -> tuple[str, str]:
    """Shell for before the build (fill each empty cache folder from its seed, if one came) and
    after it (each folder as a tar for enginebuild to carry, unless it is too large)."""
    restore, save = [], [f"mkdir -p {CACHE_OUT}"]
    for i, folder in enumerate(folders):
        seed = f"{CACHE_IN}/{i}.tar"
        restore.append(f'if [ -f {seed} ] && [ -z "$(ls -A {folder} 2>/dev/null)" ]; then mkdir -p {folder} && '
                       f'(tar -xf {seed} -C {folder} && echo "compiler cache {folder}: restored") || '
                       f'echo "compiler cache {folder}: not restored"; fi')
        save.append(f'if [ -d {folder} ] && [ "$(du -sk {folder} | cut -f1)" -le {CACHE_MAX_KB} ]; then '
                    f'tar -cf {CACHE_OUT}/{i}.tar -C {folder} .; fi')
    return " ; ".join(restore) or "true", " ; ".join(save)


def _env_name(component: str) -> str:
    return "ENGINEBUILD_DEP_" + "".join(c if c.isalnum() else "_" for c in component.upper())


def touches_declared(patch: PatchRef, only: tuple[str, ...]) -> bool:
    declared = declared_matcher(only)
    return any(declared(f.path) for f in patch.patch.files)


def source_item(arcname: str, source: Pinned, patches: tuple[PatchRef, ...], label: str, epoch: int,
                only: tuple[str, ...] = ()) -> ContextItem:
    """The (patched) source tree; with declared inputs `only`, just those files, and a digest
    that a patch touching none of them leaves as it is."""
    identity = source.identity(declared_matcher(only) if only else None) if source.complete \
        else f"unpinned {source.source.describe()}"
    keyed = [p.patch.sha256 for p in patches if not only or touches_declared(p, only)]
    digest = keys.key_of("source-tree", identity=identity, patches=keyed, epoch=epoch,
                         writer=code_digest(SOURCE_TREE_WRITER) if keyed else "",  # the applier, when it applies
                         **({"inputs": list(only)} if only else {}))
    return ContextItem(arcname, digest, FromSource(source, patches, only), label=label)


def cuda_env(archs: tuple[str, ...]) -> list[tuple[str, str]]:
    """What a build script needs to compile for the declared archs: the list, and nvcc's flags
    (`12.1a` -> `-gencode arch=compute_121a,code=sm_121a`; `+PTX` adds the PTX)."""
    if not archs:
        return []
    flags = []
    for arch in archs:
        base = arch.removesuffix("+PTX")
        number = base.replace(".", "")
        flags.append(f"-gencode arch=compute_{number},code=sm_{number}")
        if arch.endswith("+PTX"):
            flags.append(f"-gencode arch=compute_{number},code=compute_{number}")
    return [("ENGINEBUILD_CUDA_ARCHS", ";".join(archs)), ("ENGINEBUILD_NVCC_GENCODE", " ".join(flags))]


# Debian packages that give /bin/sh (or a shell a build script's `sh` can be linked to)
SHELLS = frozenset({"dash", "bash", "busybox", "busybox-static", "mksh", "mksh-static", "zsh", "zsh-static", "yash",
                    "posh", "ksh"})


def _check_builder(comp: Component, builder: EnvNode) -> None:
    """A build script needs a shell: a scratch builder must unpack one."""
    if not builder.layers and builder.base is None:
        raise SpecError(comp.where, f"components.{comp.name}.builder",
                        "the builder is scratch with nothing installed: a build script needs at least a shell")
    unpacked = [name for node in builder.layers for name in node.payload.unpacked_packages()]
    if builder.base is None and unpacked and not SHELLS & set(unpacked):
        raise SpecError(comp.where, f"components.{comp.name}.builder",
                        f"the builder is scratch with {len(unpacked)} package(s) unpacked ({', '.join(unpacked[:4])}"
                        f"{', ...' if len(unpacked) > 4 else ''}) and no shell among them: a build script runs with "
                        "/bin/sh (`install: extract` unpacks what is listed and what it depends on, not Debian's "
                        "essential packages)",
                        hint="add busybox-static to the builder's system.packages, with run: "
                             "[[/bin/busybox, --install, -s, /bin]] (or dash)")


@dataclass
class _Context:
    """A component build's context (besides its source tree) and environment, as they are gathered."""

    items: list[ContextItem] = field(default_factory=list)
    env: list[tuple[str, str]] = field(default_factory=list)


def _gathered(planner: EnvPlanner, comp: Component, needed: dict[str, ComponentNode], build_args: dict[str, str],
              cuda_archs: tuple[str, ...]) -> _Context:
    """Its extra sources, the outputs of the components it needs, its CUDA architectures, its build
    script and arguments (a --build-arg changes only an argument the spec declares)."""
    ctx = _Context()
    if comp.source and comp.source.kind == "git" and comp.source.release:
        version = comp.source.at(planner.pins, f"components.{comp.name}.source").version()
        if version:
            ctx.env.append(("SETUPTOOLS_SCM_PRETEND_VERSION", version))
    for extra in comp.sources:
        pinned = extra.source.at(planner.pins, f"components.{comp.name}.sources.{extra.name}")
        ctx.items.append(source_item(f"sources/{extra.name}.tar", pinned, (), pinned.describe(), planner.epoch))
        if extra.env:
            ctx.env.append((extra.env, f"{SOURCES}/{extra.name}"))
    for need in comp.needs:
        ctx.items.append(ContextItem(f"deps/{need}.tar", needed[need].key, FromOutput(need, needed[need].key),
                                     label=f"component {need}"))
        ctx.env.append((_env_name(need), f"{DEPS}/{need}"))
    ctx.env += cuda_env(cuda_archs)
    script = comp.build.script
    assert script is not None and script.src is not None
    ctx.items.append(ContextItem("build.sh", keys.sha(read_recipe_file(script.src)), FromFile(script.src), 0o755,
                                 label=script.display))
    args = dict(comp.build.args)
    args.update({k: v for k, v in build_args.items() if k in args})
    ctx.env += sorted(args.items())
    return ctx


def _steps(planner: EnvPlanner, comp: Component, ctx: _Context) -> list[JsonDoc]:
    """Its steps as the Dockerfile runs them; their files and multi-line scripts join the context."""
    steps = []
    for step in comp.steps:
        run: str | list[str] = step.run if isinstance(step.run, str) else list(step.run)
        binds = [(f"step-files/{step.name}/{f.dest}", f"{STEP_FILES}/{f.dest}") for f in step.files]
        if isinstance(step.run, str) and "\n" in step.run.strip():
            run, item = script_run(step.run, None, f"step-scripts/{step.name}")
            ctx.items.append(item)
            binds.append((item.arcname, SCRIPT))
        for f in step.files:
            assert f.src is not None
            ctx.items.append(ContextItem(f"step-files/{step.name}/{f.dest}", keys.sha(read_recipe_file(f.src)),
                                         FromFile(f.src), f.mode, label=f.display))
        steps.append({"run": run, "mounts": mounts(step.cache, step.secrets, tuple(binds), planner.spec.secret_names)})
    return steps


def _dockerfile(planner: EnvPlanner, comp: Component, builder: EnvNode, ctx: _Context) -> str:
    """The component's Dockerfile; an editable install's hook and a compiler cache's folder join the context."""
    steps = _steps(planner, comp, ctx)
    editable: list[str] = []
    if comp.outputs.kind is OutputsKind.EDITABLE:  # the tree is built where the image keeps it, then its editable wheel
        python = comp.builder.python
        editable = [python.interpreter if python else "python3", "/opt/enginebuild/editable_wheel.py", EDITABLE_WHEELS]
        hook = EDITABLE_HOOK.read_bytes()
        ctx.items.append(ContextItem("editable_wheel.py", keys.sha(hook), FromData(hook), label="editable wheel hook"))
    caches = comp.build.cache
    restore, save = cache_scripts(caches) if caches else ("", "")
    if caches:  # the seeds are added when the build runs; this keeps the folder in every context
        ctx.items.append(ContextItem("compiler-cache/.keep", keys.sha(b""), FromData(b""), label="compiler cache"))
    sealed = planner.spec.secret_names
    # the chain's variables (the runtime's build-env) reach a build through the chain image's config;
    # a builder with no layer under the component has no such image of its own: they are set here
    chain_env = list(builder.env) if not builder.layers else []
    return render("component.Dockerfile", name=comp.name, platform=planner.platform, parent=parent_ref(builder),
                  epoch=planner.epoch, outputs=",".join(comp.outputs.paths), env=[*chain_env, *ctx.env],
                  source=comp.source is not None, sources=[e.name for e in comp.sources], deps=list(comp.needs),
                  mounts=mounts(comp.build.cache, comp.build.secrets, sealed=sealed),
                  steps=steps, cache_restore=restore, cache_save=save, cache_mounts=mounts(caches, sealed=sealed),
                  seed_mounts=mounts(caches, binds=(("compiler-cache", CACHE_IN),), sealed=sealed),
                  workdir=comp.outputs.paths[0].rstrip("/") if editable else SRC, editable=editable)


def component_node(planner: EnvPlanner, comp: Component, builder: EnvNode, needed: dict[str, ComponentNode],
                   build_args: dict[str, str], cuda_archs: tuple[str, ...] = (),
                   facts: FactsReader = no_facts, refused: str = "") -> ComponentNode:
    """`facts`: what the checkout's routes files say, per recipe key (the key without the patches
    applied as files): the files each build installs verbatim (plan/routes.py routes the patch
    stack by them); `refused`: why
    none of its patches may be applied as files."""
    _check_builder(comp, builder)
    source: ContextItem | None = None
    pinned_source: Pinned | None = None
    if comp.source:
        pinned_source = comp.source.at(planner.pins, f"components.{comp.name}.source")
        source = source_item("source.tar", pinned_source, (), pinned_source.describe(), planner.epoch, comp.inputs)
    ctx = _gathered(planner, comp, needed, build_args, cuda_archs)
    dockerfile = _dockerfile(planner, comp, builder, ctx)
    secrets = tuple(dict.fromkeys(comp.build.secrets + tuple(s for step in comp.steps for s in step.secrets)))

    def key_with(extra: list[ContextItem]) -> tuple[str, tuple[ContextItem, ...]]:
        items = tuple(sorted(ctx.items + extra, key=lambda c: c.arcname))
        return keys.key_of("component", name=comp.name, platform=planner.platform, builder=builder.tip,
                           dockerfile=dockerfile, secrets=list(secrets),
                           context=[[c.arcname, c.mode, c.digest] for c in items],
                           outputs=[comp.outputs.kind, list(comp.outputs.paths)],
                           writer=code_digest(COMPONENT_WRITER)), items

    key, items = key_with([source] if source else [])
    build_patches: tuple[PatchRef, ...] = comp.patches
    file_patches: tuple[PatchRef, ...] = ()
    routes: tuple[Route, ...] = ()
    if source is not None and pinned_source is not None and comp.patches:
        why = refused or ("" if comp.patches_as_files else "patches-as-files: false") or \
            ("" if comp.outputs.kind.routable else f"its outputs are {comp.outputs.kind}")
        # routed by what the build of the patches that go into it installs verbatim (as the routes
        # files say): a patch found to touch another file goes into the build, whose own facts are read next
        known: Facts | None = None
        while True:
            build_patches, file_patches, routes = route_patches(comp.patches, known, inputs=comp.inputs, refused=why)
            source = source_item("source.tar", pinned_source, build_patches, source.label, planner.epoch, comp.inputs)
            key, items = key_with([source])
            learned = facts(key) if file_patches else None
            if learned is None or route_patches(comp.patches, learned, inputs=comp.inputs, refused=why)[0] \
                    == build_patches:
                if learned is not None:
                    build_patches, file_patches, routes = route_patches(comp.patches, learned, inputs=comp.inputs,
                                                                        refused=why)
                break
            known = learned
    inputs = {"builder": builder.tip, "instructions": keys.sha(dockerfile)}
    for item in items:
        inputs[item.label or item.arcname] = item.digest
    # each patch that reaches a declared input (without inputs: every patch), by name: the one
    # that changed is named
    inputs.update({f"patches/{p.name}": p.patch.sha256 for p in build_patches
                   if not comp.inputs or touches_declared(p, comp.inputs)})
    outside = tuple(f"patches/{p.name}" for p in build_patches if not touches_declared(p, comp.inputs)) \
        if comp.inputs else ()
    caches = comp.build.cache
    cache_key = keys.key_of("compiler-cache", name=comp.name, platform=planner.platform, builder=builder.tip,
                            folders=list(caches)) if caches else ""
    return ComponentNode(comp.name, key, planner.platform, builder, dockerfile, items, secrets, comp.needs,
                         comp.outputs, cuda_archs, inputs, outside, caches, cache_key,
                         file_patches=file_patches, stack=comp.patches if file_patches else (), routes=routes,
                         tree=source if file_patches else None)


def release_node(planner: EnvPlanner, comp: Component) -> ComponentNode:
    """A component taken from a release's wheel: its output is that file (by sha256), nothing is
    built. The Dockerfile is what `render` and `bake` show: the wheel copied into the outputs."""
    pin = planner.pins.release(release_input(comp.name, planner.platform))
    folder = comp.outputs.paths[0].rstrip("/")
    arcname = f"release/{pin.filename}" if pin else "release/NOT-PINNED.whl"
    what = f"{pin.filename} (release of component {comp.name})" if pin else ""
    context = (ContextItem(arcname, pin.sha256, FromBlob(pin.sha256, what, (pin.url,), pin.size),
                           label=f"release {pin.filename}"),) if pin else ()
    dockerfile = (f"# enginebuild component {comp.name} for {planner.platform}: the release's wheel, built nowhere\n"
                  f"FROM scratch\nCOPY {arcname} {folder}/\n")
    key = keys.key_of("component-release", name=comp.name, platform=planner.platform,
                      wheel=[pin.filename, pin.sha256] if pin else None, outputs=[OutputsKind.WHEELS, [folder]])
    empty = EnvNode("release", planner.platform, None, (), keys.key_of("base", ref="scratch", platform=planner.platform))
    inputs = {"release": pin.sha256 if pin else "not pinned"}
    return ComponentNode(comp.name, key, planner.platform, empty, dockerfile, context, (), (), comp.outputs, (),
                         inputs, release=pin)
