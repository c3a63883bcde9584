"""The plan of one image for one platform: components, then the runtime's layers in build order
(base, system, Python, component outputs, overlays, steps, manifest, files) and its settings.

Pure: no builder, no network. `plan_image` is what `plan`, `render` and `image` all read.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from enginebuild.core import keys
from enginebuild.core.platforms import Platform
from enginebuild.errors import LockError, SpecError, command
from enginebuild.io.recipefiles import read_recipe_file
from enginebuild.layerkinds import Bytecode, Data, Files, LayerPayload, OutputTree, OverlayFiles, PatchedFiles, Wheel
from enginebuild.lock.inputs import role_of
from enginebuild.lock.interpreters import interpreter_version, machine_of
from enginebuild.lock.lockfile import Lock, input_where, stale_inputs
from enginebuild.lock.pins import PythonPin
from enginebuild.plan.components import component_node, release_node
from enginebuild.plan.envs import EnvPlanner, Pins
from enginebuild.plan.model import (
    ComponentNode,
    EnvNode,
    ImagePlan,
    ImageSettings,
    LayerNode,
)
from enginebuild.plan.routes import RoutesReader, no_routes
from enginebuild.plan.writers import layer_key
from enginebuild.recipe.model import ENV_REF, FileGroup, ImageSpec, OutputsKind
from enginebuild.wire import JsonDoc

MANIFEST_PATH = "/opt/enginebuild/manifest.json"
MAX_FILE_LAYERS = 32  # file groups beyond this share the last layer
LAYER_KINDS = ("system", "python", "components", "overlays", "steps", "files")


@dataclass(frozen=True)
class Options:
    build_args: dict[str, str] = field(default_factory=dict)
    on: str | None = None  # a digest-pinned stand-in base for the runtime
    only: frozenset[str] = frozenset(LAYER_KINDS)
    strict: bool = True
    source_date_epoch: int | None = None  # SOURCE_DATE_EPOCH, as the caller read it (the plan reads no environment)
    flavour: str | None = None  # local tags of their own (`enginebuild/IMAGE:FLAVOUR`) for a build that is not the
    #                             catalogue's image (a behaviour check's build without a patch): its tags stay the user's
    # which files each recipe's build installs verbatim: the image's routes file (lock/routesfile.py)
    facts: RoutesReader = no_routes



def check_lock_for_build(spec: ImageSpec, lock: Lock | None) -> Lock:
    problems = stale_inputs(spec, lock)
    if problems:
        detail = "; ".join(f"{name}: {why}" for name, why in problems)
        first = problems[0][0]
        where = input_where(spec, first)
        raise LockError(f"{where}: refusing to build with inputs that are not pinned in the lock ({detail})",
                        hint=f"run `{command()} lock {spec.name}` and commit lockfiles/{spec.lock_name}.lock")
    assert lock is not None
    blocked = lock.blocked()
    if blocked:
        name, why = next(iter(blocked.items()))
        more = f" (and {len(blocked) - 1} more input(s))" if len(blocked) > 1 else ""
        raise LockError(f"{spec.file}: {spec.name} is not buildable here: input {name} is not pinned completely in "
                        f"lockfiles/{spec.lock_name}.lock: {why}{more}",
                        hint=f"run `{command()} lock {spec.name}` where its sources are reachable")
    return lock


def resolve_env(spec: ImageSpec, base_env: tuple[tuple[str, str], ...] | None,
                pairs: tuple[tuple[str, str], ...] | None = None, key: str = "env") -> list[tuple[str, str]]:
    """The spec's env (or `pairs`, read at `key`) with `$NAME`/`${NAME}`/`${NAME:-default}`
    replaced by the base's or earlier values. `base_env` None: the base is not pinned (an
    unpinned render), so a name it might define stays a reference, as written."""
    known = dict(base_env or ())
    out = []
    for name, value in spec.env if pairs is None else pairs:
        def replace(match: re.Match[str], name: str = name) -> str:
            if match.group("dollar"):
                return "$"
            var = match.group("braced") or match.group("bare")
            if var in known:
                return str(known[var])
            if base_env is None:
                return str(match.group(0))
            if match.group("default") is not None:
                return str(match.group("default"))
            raise SpecError(spec.where(f"{key}.{name}"), f"{key}.{name}",
                            f"refers to ${var}, which neither the base image nor an earlier env entry defines "
                            "(Docker would put the empty string there; enginebuild refuses, so that a misspelt "
                            "name is not dropped silently)",
                            hint="${" + var + ":-} for Docker's empty string, ${" + var + ":-value} for a default, "
                                 "$$ for a literal dollar")

        resolved = ENV_REF.sub(replace, value)
        known[name] = resolved
        out.append((name, resolved))
    return out


def adds_no_layer(spec: ImageSpec) -> bool:
    """Labels, env and settings over a base, nothing installed, run or copied."""
    system, python = spec.runtime.system, spec.runtime.python
    return not ((system and (system.packages or system.run or system.upgrade)) or (python and python.requirements)
                or spec.install or spec.overlays or spec.steps or spec.files)


CACHE_LABEL = "org.enginebuild.compile-cache"  # the folders `serve` captures and restores (NAME: FOLDER)


def labels_of(spec: ImageSpec, lock: Lock, manifest: JsonDoc, pins: Pins, on: str | None,
              in_label: bool, created: str) -> dict[str, str]:
    revision = source_url = ""
    for comp in [spec.component(n) for n in spec.install] + list(spec.components):
        if comp.source and comp.source.pinned_by_lock:
            commit, version, source_url = lock.source_pin(comp.source, f"components.{comp.name}.source").origin()
            revision = commit or (f"{comp.name}=={version}" if version else "")
            break
    labels = {"org.opencontainers.image.title": spec.name.split(":")[0],
              "org.opencontainers.image.description": spec.description,
              "org.opencontainers.image.source": source_url, "org.opencontainers.image.revision": revision}
    labels = {k: v for k, v in labels.items() if v}
    labels.update(dict(spec.labels))
    labels.update({
        "org.opencontainers.image.created": created,
        # each patch once, though components sharing a stack each list it in the manifest
        "org.enginebuild.patches": ",".join(dict.fromkeys(f"{p['name']}@sha256:{p['sha256']}"
                                                          for p in manifest["patches"])),
        "org.enginebuild.manifest": json.dumps(manifest, sort_keys=True, separators=(",", ":")) if in_label
        else MANIFEST_PATH,
        "org.enginebuild.inputs": keys.sha(keys.canonical(manifest["inputs"])),
    })
    if spec.variants or ":" in spec.name:
        labels["org.enginebuild.variant"] = spec.name.partition(":")[2] or "default"
    if on:
        labels["org.enginebuild.stand-in-base"] = on
    if spec.compile_cache:
        labels[CACHE_LABEL] = json.dumps(dict(spec.compile_cache), sort_keys=True, separators=(",", ":"))
    return {k: v for k, v in sorted(labels.items()) if v or k in dict(spec.labels)}


def manifest_of(spec: ImageSpec, lock: Lock, platform: str, created: str, unused: tuple[str, ...] = ()) -> JsonDoc:
    """The image's manifest of pins: what it was built from, for this platform. A component that
    nothing installs or needs is not built, so neither it nor its inputs are listed."""
    def built(name: str) -> bool:
        return not any(name.startswith(f"components.{u}.") for u in unused)

    patches = [{"name": p.name, "sha256": p.patch.sha256, "applies_to": owner} for owner, p in spec.all_patches
               if owner not in unused]
    inputs = {n: e.resolved for n, e in sorted(lock.entries.items())
              if ("@" not in n or n.endswith("@" + platform)) and built(n)}
    return {"enginebuild-manifest": 2, "image": spec.name, "platform": platform, "created": created,
            "inputs": inputs, "patches": patches,
            "components": [c.name for c in spec.components if c.name not in unused], "installed": list(spec.install)}


def _file_layers(groups: tuple[FileGroup, ...], parent: str, epoch: int) -> list[LayerNode]:
    layers: list[LayerNode] = []
    chunks = [list(groups[i:i + 1]) for i in range(min(len(groups), MAX_FILE_LAYERS - 1))]
    if len(groups) >= MAX_FILE_LAYERS:
        chunks.append(list(groups[MAX_FILE_LAYERS - 1:]))
    for chunk in chunks:
        entries = tuple(e for g in chunk for e in g.entries)
        digests = {e.display: e.sha256 or keys.sha(read_recipe_file(e.src) if e.src else b"")
                   for e in entries if e.src is not None or e.sha256}
        payload = Files(entries, tuple(digests[e.display] for e in entries))
        key = layer_key(payload, epoch)
        name = "files " + ", ".join(g.key for g in chunk)
        layers.append(LayerNode("files", name, key, keys.chain(layers[-1].chain if layers else parent, key),
                                payload, {f"file {d}": v for d, v in digests.items()}))
    return layers


EDITED = ("patched", "overlay")  # the layer kinds an edit of a patch or an overlay touches


class _Stack:
    """The runtime's layers as they are planned, each keyed and chained on the one below."""

    def __init__(self, layers: list[LayerNode], root: str, epoch: int):
        self.layers, self.root, self.epoch = layers, root, epoch
        self.before_edited: Callable[[], None] | None = None  # added once, below the first edited layer

    @property
    def top(self) -> str:
        return self.layers[-1].chain if self.layers else self.root

    def add(self, layer_kind: str, name: str, payload: LayerPayload, inputs: dict[str, str]) -> None:
        if layer_kind in EDITED and self.before_edited is not None:
            first, self.before_edited = self.before_edited, None
            first()
        key = layer_key(payload, self.epoch)
        self.layers.append(LayerNode(layer_kind, name, key, keys.chain(self.top, key), payload, inputs))


def _pinned_lock(spec: ImageSpec, lock: Lock | None, platform: str, options: Options) -> Lock:
    if platform not in spec.platforms and not options.on:
        raise SpecError(spec.where("platforms"), "platforms",
                        f"{spec.name} is not built for {platform} (it lists {', '.join(spec.platforms)})")
    if options.strict and not options.on:
        lock = check_lock_for_build(spec, lock)
    if lock is None:
        raise LockError(f"lockfiles/{spec.lock_name}.lock does not exist",
                        hint=f"run `{command()} lock {spec.name}` (or `render --unpinned` to read the plan)")
    return lock


def _components(spec: ImageSpec, planner: EnvPlanner, options: Options,
                run_env: tuple[tuple[str, str], ...]) -> dict[str, ComponentNode]:
    """Every component something installs or needs, each on its builder environment."""
    components: dict[str, ComponentNode] = {}
    builders: dict[str, EnvNode] = {}
    used = spec.used_components()
    for comp in spec.components:
        if comp.name not in used:  # nothing installs or needs it: neither locked nor planned
            continue
        if comp.release is not None:
            components[comp.name] = release_node(planner, comp)
            continue
        role = role_of(spec, comp.builder)
        if role not in builders:  # on the runtime, a build sees build-env as the runtime's commands do
            builders[role] = planner.environment(role, comp.builder, on=options.on, run_env=run_env) \
                if role == "runtime" else planner.environment(role, comp.builder)
        users = [c.name for c in spec.components if comp.name in c.needs and c.name in used]
        refused = f"component {users[0]} builds on its outputs" if users else ""
        components[comp.name] = component_node(planner, comp, builders[role], components, options.build_args,
                                               comp.cuda_archs or spec.cuda_archs, options.facts(spec.lock_name), refused)
    return components


def _python_layers(stack: _Stack, spec: ImageSpec, pins: Pins, platform: str,
                   components: dict[str, ComponentNode]) -> None:
    """The wheels components build for the runtime's Python (an editable one's tree first), and the
    patches applied as files to what they installed."""
    python = spec.runtime.python
    assert python is not None
    pypin = pins.python(f"runtime.python@{platform}") if python.requirements else PythonPin(())
    for pin in pypin.installed():
        if pin.origin != "component":
            continue
        node = components[pin.component]
        editable = node.outputs.paths[0] if node.outputs.kind is OutputsKind.EDITABLE else ""
        if editable:  # its tree first, where the editable wheel points
            stack.add("output", f"tree of {pin.component} (editable, {node.outputs.paths[0]})",
                      OutputTree(pin.component, node.key, node.outputs, editable_tree=True),
                      {f"component {pin.component}": node.key})
        req = next(r for r in python.requirements if r.component == pin.component and r.name == pin.name)
        closure = tuple((p.name, p.version) for p in pypin.packages if p.origin != "component") if req.deps else None
        others = tuple((p.name, p.version) for p in pypin.packages if p.origin == "component" and p is not pin) \
            if req.excludes else ()
        stack.add("output", f"python {pin.name} (built by component {pin.component})",
                  Wheel(pin, python.site_packages, python.interpreter, node.key, closure,
                        marker_environment(python.version, platform), editable, req.excludes, others),
                  {f"component {pin.component}": node.key})
        if node.file_patches:
            stack.add("patched", *patched_files(node, stack.epoch, python.site_packages, python.interpreter))


def _installed_layers(stack: _Stack, spec: ImageSpec, components: dict[str, ComponentNode]) -> None:
    """What `install:` takes of each component's outputs, and its patches applied as files."""
    python = spec.runtime.python
    site, interpreter = (python.site_packages, python.interpreter) if python else ("", "/usr/bin/python3")
    for name in spec.install:
        node = components[name]
        if node.outputs.kind is OutputsKind.WHEELS and not python:
            raise SpecError(spec.where("install"), "install",
                            f"component {name} produces wheels; the runtime needs `python:` (its version and "
                            "site-packages) to install them")
        stack.add("output", f"outputs of {name} ({node.outputs.kind})",
                  OutputTree(name, node.key, node.outputs, site, interpreter), {f"component {name}": node.key})
        if node.file_patches:
            stack.add("patched", *patched_files(node, stack.epoch, site, interpreter))


def _tags(spec: ImageSpec, platform: str, options: Options) -> tuple[str, str]:
    """The platform's tag and the plain one: enginebuild/IMAGE:FLAVOUR-ARCH, enginebuild/IMAGE:FLAVOUR."""
    image, _, flavour = spec.name.partition(":")
    flavour = flavour or "latest"
    if options.on:
        flavour = f"on-{options.on.rsplit(':', 1)[-1][:12]}"
    if options.flavour:
        flavour = options.flavour
    return f"enginebuild/{image}:{flavour}-{Platform.parse(platform).arch}", f"enginebuild/{image}:{flavour}"


def plan_image(spec: ImageSpec, lock: Lock | None, platform: str, options: Options) -> ImagePlan:
    lock = _pinned_lock(spec, lock, platform, options)
    pins = Pins(spec, lock, strict=options.strict)
    planner = EnvPlanner(spec, pins, platform, keys.epoch(options.source_date_epoch))
    only = options.only
    base_pin = planner.base("runtime", spec.runtime, options.on)
    unknown = base_pin is not None and base_pin.digest is None and not base_pin.scratch
    # the commands see the base's variables and build-env; env comes after them (a launcher's PORT
    # is no input of an apt command): the image's config holds all three
    base_env = None if unknown else base_pin.env if base_pin else ()
    run_env = tuple(resolve_env(spec, base_env, spec.build_env, "build-env"))
    components = _components(spec, planner, options, run_env) if "components" in only else {}
    own = resolve_env(spec, None if base_env is None else (*base_env, *run_env), spec.env)
    image_env = tuple({**dict(run_env), **dict(own)}.items())
    runtime = planner.environment("runtime", spec.runtime, on=options.on, parts=only, run_env=run_env)
    stack = _Stack(list(runtime.layers), runtime.root, planner.epoch)
    interpreter = runtime_interpreter(spec, planner, base_pin) if spec.bytecode else None
    if interpreter:
        stack.before_edited = functools.partial(_bytecode_below, stack, interpreter, runtime)
    if spec.runtime.python and "python" in only and "components" in only:
        _python_layers(stack, spec, pins, platform, components)
    if "components" in only:
        _installed_layers(stack, spec, components)
    if "overlays" in only:
        for overlay in (o for o in spec.overlays if o.patches):
            stack.add("overlay", f"overlay {overlay.name} ({len(overlay.patches)} patch(es) in {overlay.installed})",
                      OverlayFiles(overlay.name, overlay.installed, overlay.patches,
                                   overlay.source.at(pins, f"overlays.{overlay.name}.source"), runtime.root),
                      {f"patches/{p.name}": p.patch.sha256 for p in overlay.patches})
    layers = stack.layers
    if "steps" in only:
        for i, step in enumerate(spec.steps):
            prefix = EnvNode("runtime", platform, runtime.base, tuple(layers), runtime.root, run_env)
            made = planner.step_layer(prefix, layers, step, run_env)
            layers.append(dataclasses.replace(made, where=str(spec.where(f"steps[{i}]"))))
    if interpreter and layers:
        _bytecode_above(stack, interpreter, runtime)
    unused = tuple(c.name for c in spec.components if c.name not in spec.used_components())
    created = keys.created_of(options.source_date_epoch)
    manifest = manifest_of(spec, lock, platform, created, unused)
    # an image that adds no layer of its own (labels, env, entrypoint over a base) keeps the
    # base's layers as they are: its manifest goes into a label, as `manifest: label` asks
    in_label = spec.manifest == "label" or adds_no_layer(spec)
    if not in_label:
        data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
        stack.add("manifest", "manifest", Data(MANIFEST_PATH, data), {"manifest": keys.sha(data)})
    if "files" in only:
        layers += _file_layers(spec.files, stack.top, stack.epoch)
    labels = {k: v for k, v in labels_of(spec, lock, manifest, pins, options.on, in_label, created).items()
              if k not in spec.labels_removed}
    note = ("the base is not pinned: its variables ($NAME) are shown as written, `lock` reads their values from its "
            "config") if unknown and any("$" in v for _, v in image_env) else ""
    config = ImageSettings.of(spec, image_env, labels, note, spec.labels_removed)
    final = EnvNode("runtime", platform, runtime.base, tuple(layers), runtime.root, run_env)  # config: image_env
    return ImagePlan(spec.name, platform, created, stack.epoch, tuple(components.values()), final,
                     config, manifest, _tags(spec, platform, options), spec.cuda_archs, options.on, unused)


def _bytecode_below(stack: _Stack, interpreter: tuple[str, str], runtime: EnvNode) -> None:
    """The bytecode of every layer below the first one an edit touches (patches applied as files,
    overlays), added just below it: an edit then changes no layer under that one, so the engine
    registers only the small layers from there up, never this one again (a layer's place in the
    chain is part of what the engine stores it as, however its bytes are unchanged)."""
    _bytecode(stack, "bytecode", interpreter, runtime, list(stack.layers), edited=())


def _bytecode_above(stack: _Stack, interpreter: tuple[str, str], runtime: EnvNode) -> None:
    """The bytecode of the layers above the last bytecode layer (all of them when an image has no
    edited layer): each edited layer's alone, the others together, so an edit's bytecode moves
    alone. Compiled, like the one below, in the chain up to the runtime's last system layer (else
    its base), which holds the interpreter: a CI runner that stands the rest in loads only that."""
    last = max((i for i, n in enumerate(stack.layers) if n.kind == "bytecode"), default=None)
    above = list(stack.layers[last + 1:] if last is not None else stack.layers)
    what = "bytecode of the edited layers" if last is not None and all(n.kind in EDITED for n in above) else \
        "bytecode of the edited layers and those above them" if last is not None else "bytecode"
    _bytecode(stack, what, interpreter, runtime, above, edited=EDITED if last is not None else ())


def _bytecode(stack: _Stack, what: str, interpreter: tuple[str, str], runtime: EnvNode, sources: list[LayerNode],
              edited: tuple[str, ...]) -> None:
    if not sources:
        return
    at = next((n.chain for n in reversed(runtime.layers) if n.kind == "system"), runtime.root)
    stack.add("bytecode", f"{what} (Python {interpreter[0]}, checked hashes)",
              Bytecode(tuple(n.stored_as for n in sources), tuple(n.name for n in sources), *interpreter,
                       tuple(n.kind in edited for n in sources), at),
              {"layers below": keys.sha(keys.canonical([n.stored_as for n in sources]))})


def runtime_interpreter(spec: ImageSpec, planner: EnvPlanner, base: object) -> tuple[str, str] | None:
    """(major.minor, path) of the runtime's Python: its `python:`, else the Debian python3.N its
    system packages install, else the base's PYTHON_VERSION (python3 on its PATH); None for none."""
    python = spec.runtime.python
    if python:
        return python.version, python.interpreter
    system = planner.pins.get(f"runtime.system@{planner.platform}") \
        if spec.runtime.system and spec.runtime.system.packages else None
    found = interpreter_version(system, base)
    if found is None:
        return None
    return found[0], "/usr/bin/python3" if found[1].startswith("its system") else "python3"


def patched_files(node: ComponentNode, epoch: int, site: str, interpreter: str) -> tuple[str, PatchedFiles,
                                                                                     dict[str, str]]:
    """The layer applying a component's file-routed patches to what its output layer installed."""
    assert node.tree is not None
    names = ", ".join(p.name.rsplit("/", 1)[-1] for p in node.file_patches)
    wheels = node.outputs.kind is OutputsKind.WHEELS
    payload = PatchedFiles(node.name, node.key, node.file_patches, node.tree, node.outputs.kind,
                           node.outputs.to if node.outputs.kind is OutputsKind.PREFIX else "", site if wheels else "",
                           interpreter if wheels else "", epoch)
    inputs = {f"component {node.name}": node.key, **{f"patches/{p.name}": p.patch.sha256 for p in node.file_patches}}
    return f"patches of {node.name} as files ({names})", payload, inputs


def marker_environment(python_version: str, platform: str) -> tuple[tuple[str, str], ...]:
    """PEP 508 marker values of a CPython `python_version` on linux/<arch>."""
    return (("implementation_name", "cpython"), ("os_name", "posix"), ("platform_machine", machine_of(platform)),
            ("platform_python_implementation", "CPython"), ("platform_system", "Linux"),
            ("python_full_version", f"{python_version}.0"), ("python_version", python_version),
            ("sys_platform", "linux"))
