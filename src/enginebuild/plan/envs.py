"""Environments as chains of layers: base, system packages, commands, Python distributions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from enginebuild.core import keys
from enginebuild.errors import LockError, SpecError, command
from enginebuild.io.recipefiles import read_recipe_file
from enginebuild.layerkinds.commands import Run
from enginebuild.layerkinds.context import ContextItem, FromBlob, FromData, FromFile
from enginebuild.layerkinds.system import Sysroot
from enginebuild.layerkinds.wheels import Wheels
from enginebuild.lock.inputs import AnyInput, image_inputs
from enginebuild.lock.interpreters import interpreter_mismatch
from enginebuild.lock.lockfile import Lock
from enginebuild.lock.pins import ImagePin, PyPin, PythonPin, SystemPin
from enginebuild.plan.model import EnvNode, LayerNode
from enginebuild.plan.render import TemplateValues, render
from enginebuild.plan.wheelgroups import wheel_sets
from enginebuild.plan.writers import layer_key
from enginebuild.recipe.model import Environment, ImageSpec, Step
from enginebuild.wire import JsonDoc

CHAIN_REPO = "enginebuild/chain"
DEBS_DIR = "/tmp/enginebuild-debs"
STEP_FILES = "/opt/enginebuild/step"  # where a step's files are mounted (read-only, never in a layer)


@dataclass
class Pins:
    """Typed pins of an image's inputs; with strict=False, what is not pinned reads as requested."""

    spec: ImageSpec
    lock: Lock
    strict: bool = True

    def __post_init__(self) -> None:
        self.inputs = {inp.name: inp for inp in image_inputs(self.spec)}

    def image(self, name: str) -> ImagePin:
        return self._typed(name, ImagePin)

    def system(self, name: str) -> SystemPin:
        return self._typed(name, SystemPin)

    def python(self, name: str) -> PythonPin:
        return self._typed(name, PythonPin)

    def release(self, name: str) -> PyPin | None:
        """A release's wheel; None where `render --unpinned` shows one the lock does not pin."""
        found = self.get(name)
        return found if isinstance(found, PyPin) else None

    def _typed(self, name: str, kind: type[T]) -> T:
        found = self.get(name)
        if not isinstance(found, kind):  # a lock whose entry another kind of input wrote
            raise LockError(f"lockfiles/{self.spec.lock_name}.lock: input {name} is not a {kind.__name__}",
                            hint=f"run `{command()} lock {self.spec.name}`")
        return found

    def get(self, name: str) -> object:
        """The pin of input `name`, as its input reads it (the typed getters above say which)."""
        inp = self.inputs[name]
        entry = self.lock.entries.get(name)
        if entry is None or entry.resolved is None:
            if not self.strict:
                return placeholder(inp)
            why = entry.unresolved if entry and entry.unresolved else "not in the lock"
            raise LockError(f"{inp.where}: input {name} is not pinned in lockfiles/{self.spec.lock_name}.lock: {why}",
                            hint=f"run `{command()} lock {self.spec.name}` where its source is reachable")
        return inp.decode(entry.resolved)


def placeholder(inp: AnyInput) -> object:
    """What `render --unpinned` shows for an input the lock does not resolve."""
    return inp.placeholder()


T = TypeVar("T")
MOUNT_UNSAFE = frozenset(',"\'=\n\r\t \\\x00')  # what would end a --mount field or start another


def mount_value(value: str) -> str:
    """One value of a `--mount=k=v,k=v` option: BuildKit reads the option as comma-separated
    fields (its last `id=` wins), so a value holding a comma, quote, `=` or blank would add
    fields of its own; refused (the spec's schema refuses them first, naming file and key)."""
    bad = sorted(set(value) & MOUNT_UNSAFE)
    if bad or not value:
        raise SpecError(None, "", f"{value[:80]!r} cannot be a mount's path: it holds {''.join(bad)!r}",
                        hint="name cache folders and step files with letters, digits and ._@+-/")
    return value


def mounts(cache: tuple[str, ...] = (), secrets: tuple[str, ...] = (), binds: tuple[tuple[str, str], ...] = (),
           sealed: tuple[str, ...] = ()) -> str:
    """`sealed`: the secrets the image declares. Its cache mounts are its own, apart from those of
    images that declare other secrets or none: a secret one image's step leaves in a cache never
    reaches an image whose layers are not searched for it. Every value is a validated part
    (`mount_value`): no path can add an option."""
    v = mount_value
    out = "".join(f" --mount=type=bind,source={v(src)},target={v(dst)}" for src, dst in binds)
    seal = f"#secrets={'+'.join(v(s) for s in sorted(sealed))}" if sealed else ""
    out += "".join(f" --mount=type=cache,id={v(d)}{seal},target={v(d)}" if seal else
                   f" --mount=type=cache,target={v(d)}" for d in cache)
    out += "".join(f" --mount=type=secret,id={v(s)}" for s in secrets)
    return out


def parent_ref(env: EnvNode, upto: str | None = None) -> str:
    """What a Dockerfile builds FROM to start on this chain (up to the layer `upto`)."""
    tip = upto or env.tip
    if tip == env.root and env.base is not None:
        return env.base.ref
    return f"{CHAIN_REPO}:{tip}"


SCRIPT = "/opt/enginebuild/step-script.sh"  # a step's script of several lines, mounted for its RUN


STOP_ON_FAILURE = {  # put before a script's first line, on that line: its line numbers stay the user's
    "bash": "trap 'echo \"enginebuild: the script stopped at its line $LINENO (exit $?)\" >&2' ERR; "
            "set -eo pipefail; ",
    "sh": "trap 'rc=$?; [ $rc -eq 0 ] || echo \"enginebuild: the script stopped${LINENO:+ at its line $LINENO} "
          "(exit $rc)\" >&2' EXIT; set -e; ",
}


def script_run(script: str, shell: list[str] | None, arcname: str) -> tuple[list[str], ContextItem]:
    """A script of several lines, as a file of the build context run by the image's shell (or
    /bin/sh): no line of it ever becomes a Dockerfile instruction. It stops at its first failing
    command, as GitHub Actions runs `run: |` (`set -e`, and `pipefail` under bash), and says at
    which line where the shell can tell (bash, busybox; dash gives the exit status only)."""
    argv = [*(shell[:-1] if shell and shell[-1] == "-c" else shell or ["/bin/sh"])]
    data = (STOP_ON_FAILURE["bash" if argv[0].rsplit("/", 1)[-1] == "bash" else "sh"] + script).encode()
    item = ContextItem(arcname, keys.sha(data), FromData(data), 0o755, label="script")
    return [*argv, SCRIPT], item


class EnvPlanner:
    def __init__(self, spec: ImageSpec, pins: Pins, platform: str, epoch: int):
        self.spec, self.pins, self.platform = spec, pins, platform
        self.epoch = epoch

    def base(self, role: str, env: Environment, on: str | None = None) -> ImagePin | None:
        if on:
            return ImagePin(on, on.rpartition("@")[2], None)
        if env.base == "scratch":
            return None
        pin = self.pins.image(f"{role}.base@{self.platform}")
        return pin

    def run_layer(self, parent: EnvNode, layers: list[LayerNode], what: str, commands: list[TemplateValues],
                  context: tuple[ContextItem, ...], secrets: tuple[str, ...], env: tuple[tuple[str, str], ...],
                  kind: str = "run", inputs: dict[str, str] | None = None) -> LayerNode:
        prefix = EnvNode(parent.role, parent.platform, parent.base, tuple(layers), parent.root, parent.env)
        if not layers and parent.base is None and self.pins.strict:
            raise SpecError(self.spec.where("system"), "system.run",
                            f"{what}: a command needs a shell, but on scratch nothing is installed before it "
                            "(use `install: extract` with a shell such as busybox-static)")
        dockerfile = render("run.Dockerfile", what=what, platform=self.platform, parent=parent_ref(prefix),
                            epoch=self.epoch, env=list(env), commands=commands)
        body = "\n".join(line for line in dockerfile.splitlines() if not line.startswith("FROM "))
        payload = Run(dockerfile, context, secrets, self.platform, distribution=kind == "system")
        key = layer_key(payload, self.epoch)
        return LayerNode(kind, what, key, keys.chain(prefix.tip, key), payload, inputs or {"commands": keys.sha(body)})

    def environment(self, role: str, env: Environment, *, on: str | None = None,
                    parts: frozenset[str] = frozenset({"system", "python"}),
                    run_env: tuple[tuple[str, str], ...] = ()) -> EnvNode:
        base = self.base(role, env, on)
        # the variables the chain's commands see are part of every chain image's identity (its config)
        root = keys.key_of("base", ref=base.digest if base else "scratch", platform=self.platform,
                           **({"env": [list(p) for p in run_env]} if run_env else {}))
        node = EnvNode(role, self.platform, base, (), root, run_env)
        layers: list[LayerNode] = []
        system = env.system
        if system and "system" in parts:
            pin = self.pins.system(f"{role}.system@{self.platform}") if system.packages else \
                SystemPin((), (), ())
            debs = pin.packages
            if debs and system.install == "extract":
                sysroot = Sysroot(debs, tuple(pin.url(d) for d in debs))
                key = layer_key(sysroot, self.epoch)
                parent = layers[-1].chain if layers else root
                layers.append(LayerNode("system", f"system packages ({len(debs)} .debs, unpacked)", key,
                                        keys.chain(parent, key), sysroot,
                                        {"packages": keys.sha(keys.canonical([[d.name, d.version] for d in debs]))}))
            commands: list[JsonDoc] = []
            context: tuple[ContextItem, ...] = ()
            if debs and system.install == "dpkg":
                context = tuple(ContextItem(f"debs/{Path(d.filename).name}", d.sha256,
                                            FromBlob(d.sha256, f"{d.name} {d.version} (.deb)", (pin.url(d),), d.size),
                                            label=f"{d.name} {d.version}") for d in debs)
                commands.append({"run": f"dpkg -i {DEBS_DIR}/*.deb",
                                 "mounts": mounts(binds=(("debs", DEBS_DIR),))})
            commands += [{"run": c if isinstance(c, str) else list(c), "mounts": ""} for c in system.run]
            if commands:
                what = "system packages and commands" if context else "system commands"
                layers.append(self.run_layer(node, layers, what, commands, context, (), run_env, "system",
                                             {"packages": keys.sha(keys.canonical([c.digest for c in context])),
                                              "commands": keys.sha(keys.canonical([str(c) for c in system.run]))}))
        if env.python and env.python.requirements and "python" in parts:
            python = self.pins.python(f"{role}.python@{self.platform}")
            system_pin = self.pins.system(f"{role}.system@{self.platform}") if env.system and env.system.packages else None
            why = interpreter_mismatch(env.python, system_pin, base)
            if why and self.pins.strict:
                path = "python.version" if role == "runtime" else f"{role}.python.version"
                raise SpecError(self.spec.where(path), path, why)
            if self.pins.strict and base is not None and not on and python.base_digest != base.digest:
                raise LockError(f"{self.spec.where('python')}: the Python requirements were resolved against "
                                f"{python.base_digest or 'no base'}, not the locked base {base.digest}",
                                hint=f"run `{command()} lock {self.spec.name}`")
            from_lock = [p for p in python.installed() if p.origin != "component"]  # components': plan/image.py
            for group in wheel_sets(from_lock):
                removes = tuple((p.name, self.replaced_folder(p, base, env.python.site_packages)) for p in group.pins if p.replaces)
                parent = layers[-1].chain if layers else root
                payload = Wheels(group.pins, env.python.site_packages, env.python.interpreter,
                                 base.ref if removes and base else "", removes,
                                 base.digest if removes and base else "")
                key = layer_key(payload, self.epoch)
                layers.append(LayerNode("wheel", group.name, key, keys.chain(parent, key), payload,
                                        {f"python {p.name}": p.sha256 or p.commit for p in group.pins}))
        return EnvNode(role, self.platform, base, tuple(layers), root, run_env)

    @staticmethod
    def replaced_folder(pin: PyPin, base: ImagePin | None, site_packages: str) -> str:
        """The .dist-info folder of the version of `pin` the base ships, which its layer deletes:
        where the lock read it, else where installers put it (the build looks there)."""
        found = base.dist_folder(pin.name) if base else ""
        return found or f"{site_packages.strip('/')}/{pin.name.replace('-', '_')}-{pin.replaces}.dist-info"

    def step_layer(self, parent: EnvNode, layers: list[LayerNode], step: Step,
                   run_env: tuple[tuple[str, str], ...]) -> LayerNode:
        # a shell-form step runs under the image's `shell` when it sets one, as RUN follows SHELL
        shell = list(self.spec.shell) if self.spec.shell else None
        run: str | list[str] = ([*shell, step.run] if shell else step.run) if isinstance(step.run, str) \
            else list(step.run)
        context = tuple(ContextItem(f"step-files/{f.dest}", keys.sha(read_recipe_file(f.src)), FromFile(f.src), f.mode,
                                    label=f.display) for f in step.files if f.src is not None)
        binds = [(f"step-files/{f.dest}", f"{STEP_FILES}/{f.dest}") for f in step.files]
        if isinstance(step.run, str) and "\n" in step.run.strip():
            run, item = script_run(step.run, shell, "step-script")
            context += (item,)
            binds.append(("step-script", SCRIPT))
        command: TemplateValues = {"run": run, "mounts": mounts(cache=step.cache, secrets=step.secrets, binds=tuple(binds),
                                                sealed=self.spec.secret_names)}
        inputs = {"step": keys.sha(keys.canonical(command)), **{item.label: item.digest for item in context}}
        return self.run_layer(parent, layers, f"step {step.name}", [command], context, step.secrets, run_env,
                              "step", inputs)
