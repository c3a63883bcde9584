"""`render IMAGE --bake DIR`: the image as a build plain `docker buildx bake` runs without
enginebuild (the user's way out).

DIR/docker-bake.hcl names a target per platform (the runtime image) and per component; each
platform's folder holds one multi-stage Dockerfile and everything it reads:
- a builder environment is a stage; a component is a stage on it (`component-NAME`) built from
  its sources as enginebuild builds it, reading what it needs with `COPY --from` the stages of
  those components; the runtime is the last stage (`runtime`) with the image's settings;
- the commands of command layers are RUN instructions (their variables as ARG, so the image's
  configuration carries only its own);
- a component's outputs are copied into the runtime with `COPY --from`;
- layers enginebuild writes itself (unpacked .debs, Python distributions, recipe files, the
  manifest) are the tars it made, in layers/, each `ADD`ed (Docker unpacks a local tar): plain
  Docker has no installer that reproduces them from the pins. A layer that deletes files of the
  layers below it (an upgrade over a base) cannot be written as ADD and is refused.
One Dockerfile with stages rather than targets joined by named contexts: the Dockerfile frontend
built into older engines does not know named contexts, and every frontend knows stages."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tarfile
from io import BytesIO
from pathlib import Path

from enginebuild.errors import UserError, command
from enginebuild.execution.executor import Executor
from enginebuild.execution.fetch import plan_downloads
from enginebuild.execution.materialize import Materializer
from enginebuild.execution.secretscan import Scanner
from enginebuild.io.files import write_folder
from enginebuild.io.store import Store
from enginebuild.layerkinds.context import ContextItem
from enginebuild.plan.model import ComponentNode, EnvNode, ImagePlan, LayerNode
from enginebuild.plan.quote import dockerfile_string
from enginebuild.plan.stored import layer_blobs
from enginebuild.plan.views import settings_lines
from enginebuild.recipe.model import Outputs
from enginebuild.usecases.rendering import fresh, stamp_by_content
from enginebuild.workspace import Workspace

DEPS = "/opt/enginebuild/deps"
CACHE_SEED = "/opt/enginebuild/compiler-cache-"  # enginebuild's compiler-cache carriage: not exported


def write_bake(ws: Workspace, plans: list[ImagePlan], folder: Path) -> list[Path]:
    """The bake folder, written whole into a new folder that then takes `folder`'s place: `folder`
    must be absent, empty, or an earlier bake (its docker-bake.hcl), never a folder of other files.
    Returns what it wrote: each platform's folder, then the bake file."""
    check_bake_folder(folder)

    def fill(stage: Path) -> None:
        for plan in plans:
            Stages(ws, plan, fresh(stage / plan.platform.replace("/", "-"))).write()
        names = [(plan.platform.replace("/", "-"), plan) for plan in plans]
        (stage / "docker-bake.hcl").write_text(bake_file(names))

    done = write_folder(folder, fill)
    return [done / plan.platform.replace("/", "-") for plan in plans] + [done / "docker-bake.hcl"]


def check_bake_folder(folder: Path) -> None:
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise UserError(f"render --bake {folder}: is not a folder", hint="name a new folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / "docker-bake.hcl").is_file():
        raise UserError(f"render --bake {folder}: holds files that are not an earlier bake (no docker-bake.hcl)",
                        hint="name a new or empty folder: its files would be replaced")


class Stages:
    """One platform's Dockerfile and the files it reads, written into `root`."""

    def __init__(self, ws: Workspace, plan: ImagePlan, root: Path):
        self.ws, self.plan, self.root = ws, plan, root
        self.executor = Executor(ws.home, mirrors=ws.mirrors, scanner=Scanner(ws.spec(plan.image), store=Store(ws.home)))
        self.executor.fetcher.all(plan_downloads(plan))
        outputs = {c.key: r.sha256 for c in plan.components if (r := self.executor.output_record(c))}
        self.materializer = Materializer(ws.context(self.executor.http, plan.epoch), plan.image, outputs)
        self.envs: dict[str, str] = {}  # builder environment tip -> its stage
        self.lines: list[str] = []

    def write(self) -> None:
        plan = self.plan
        self.lines += [f"# {plan.image} ({plan.platform}) for `docker buildx bake`, written by `{command()} render "
                       f"{plan.image} --bake`:", "# see docker-bake.hcl beside this folder; built without enginebuild", ""]
        for comp in plan.components:
            self.component(comp)
        self.env(plan.runtime, "runtime")
        self.lines += settings_lines(plan.config)
        (self.root / "Dockerfile").write_text("\n".join(self.lines) + "\n")
        if (self.root / "ctx").is_dir():  # BuildKit sends what changed (see usecases/rendering.py)
            stamp_by_content(self.root / "ctx", plan.epoch)

    # -- stages ----------------------------------------------------------------------------
    def env(self, env: EnvNode, stage: str) -> None:
        base = env.base.ref if env.base else "scratch"
        self.lines.append(f"FROM {base} AS {stage}")
        for node in env.layers:
            self.lines += self.layer(node)
        self.lines.append("")

    def builder_stage(self, env: EnvNode) -> str:
        if env.tip not in self.envs:
            self.envs[env.tip] = f"env-{env.tip[:12]}"
            self.env(env, self.envs[env.tip])
        return self.envs[env.tip]

    def component(self, comp: ComponentNode) -> None:
        parent = self.builder_stage(comp.builder)
        ctx = f"ctx/component-{comp.name}"
        items = [i for i in comp.context if not i.arcname.startswith(("deps/", "compiler-cache"))]
        self.context(ctx, items)
        body = []
        for line in instructions(comp.dockerfile):
            if CACHE_SEED in line:
                continue
            dep = re.match(r"ADD deps/(.+)\.tar ", line)
            if dep:
                body += copy_from(self.plan.component(dep.group(1)), f"{DEPS}/{dep.group(1)}")
                continue
            body.append(relocate(line, items, ctx))
        self.lines += [f"FROM {parent} AS component-{comp.name}", *body, ""]

    def layer(self, node: LayerNode) -> list[str]:
        commands = node.payload.commands()
        if commands is not None:
            ctx = f"ctx/layer-{node.key[:12]}"
            self.context(ctx, list(commands.context))
            out = [f"# {node.name}: commands"]
            for line in instructions(commands.dockerfile):
                out += env_as_args(line) if line.startswith("ENV ") else [relocate(line, commands.context, ctx)]
            return out
        copied = node.payload.copied_outputs()
        if copied is not None:
            return [f"# {node.name}", *copy_into_runtime(self.plan.component(copied.component), copied.outputs)]
        return self.vendored(node)

    def vendored(self, node: LayerNode) -> list[str]:
        blobs = layer_blobs(self.executor.store, node)
        if blobs is None:
            raise UserError(f"render --bake: layer {node.name} of {self.plan.image} ({self.plan.platform}) is not "
                            "made yet", hint=f"build the image first: `{command()} image {self.plan.image}`")
        lines = [f"# {node.name}: the layer enginebuild wrote"]
        (self.root / "layers").mkdir(exist_ok=True)
        for i, (sha, _) in enumerate(blobs):
            source = self.executor.store.verified(sha, node.name)
            if deletes_files(source):
                raise UserError(f"render --bake: layer {node.name} removes files of the layers below it (an "
                                "upgrade over the base); a Dockerfile's ADD cannot delete files",
                                hint="build this image with enginebuild, or require what the base has")
            name = f"layers/{node.key[:12]}-{i}.tar"
            if not (self.root / name).exists():  # a layer the builder and the runtime share is written once
                shutil.copyfile(source, self.root / name)  # a copy: the store's blob is never the folder's file
            lines.append(f"ADD {name} /")
        return lines

    def context(self, where: str, items: list[ContextItem] | tuple[ContextItem, ...]) -> None:
        """The files a build reads, at `where` in the folder."""
        if not items:
            return
        buffer = BytesIO()
        self.materializer.write_context(buffer, "", tuple(items))
        buffer.seek(0)
        target = self.root / where
        with tarfile.open(fileobj=buffer) as tar:
            tar.extractall(target, filter="data")
        (target / "Dockerfile").unlink()


def instructions(dockerfile: str) -> list[str]:
    """A build's instructions after its FROM (comments dropped)."""
    lines = [line for line in dockerfile.splitlines() if line and not line.startswith("#")]
    return lines[1:]


def env_as_args(line: str) -> list[str]:
    """`ENV A="x" B="y"` as one ARG each: the commands see them, the image's settings do not."""

    return [f"ARG {name}={dockerfile_string(value)}" for name, _, value in
            (pair.partition("=") for pair in shlex.split(line[len("ENV "):]))]


def relocate(line: str, items: list[ContextItem] | tuple[ContextItem, ...], where: str) -> str:
    """`line` reading its context files from `where` (ADD/COPY sources, bind mounts' sources)."""
    names: set[str] = set()
    for item in items:
        parts = item.arcname.split("/")
        names.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
    for name in sorted(names, key=len, reverse=True):
        line = re.sub(rf"(?<=source=){re.escape(name)}(?=[,\s])", f"{where}/{name}", line)
        line = re.sub(rf"^(ADD|COPY) {re.escape(name)} ", rf"\1 {where}/{name} ", line)
    return line


def copy_from(comp: ComponentNode, dest: str) -> list[str]:
    """A component's outputs as another component reads them (as `ADD deps/NAME.tar` gives them)."""
    if comp.outputs.at_own_paths:
        return [f"COPY --from=component-{comp.name} {p} {dest}{p}" for p in comp.outputs.paths]
    return [f"COPY --from=component-{comp.name} {p.rstrip('/')}/ {dest}/" for p in comp.outputs.paths]


def copy_into_runtime(comp: ComponentNode, outputs: Outputs) -> list[str]:
    if outputs.at_own_paths:
        return [f"COPY --from=component-{comp.name} {p} {p}" for p in outputs.paths]
    return [f"COPY --from=component-{comp.name} {p.rstrip('/')}/ {outputs.to}" for p in outputs.paths]


def deletes_files(tar_path: str | Path) -> bool:
    with tarfile.open(tar_path) as tar:
        return any(os.path.basename(m.name.rstrip("/")).startswith(".wh.") for m in tar)


def hcl(value: str) -> str:
    return json.dumps(value).replace("${", "$${").replace("%{", "%%{")


def bake_file(targets: list[tuple[str, ImagePlan]]) -> str:
    image = targets[0][1].image
    lines = [f"# {image} for `docker buildx bake`, written by `{command()} render {image} --bake`.",
             "# Targets: the image per platform, and each component alone (NAME-PLATFORM-COMPONENT).",
             f"group \"default\" {{\n  targets = [{', '.join(hcl(f'{image}-{name}') for name, _ in targets)}]\n}}"]
    for name, plan in targets:
        secrets = sorted({s for c in plan.components for s in c.secrets}
                         | {s for n in plan.runtime.layers if (c := n.payload.commands()) for s in c.secrets})
        common = [f"  context = {hcl(name)}", "  dockerfile = \"Dockerfile\"", f"  platforms = [{hcl(plan.platform)}]"]
        if secrets:
            common.append(f"  secret = [{', '.join(hcl(f'id={s},env={s}') for s in secrets)}]")
        lines.append("\n".join([f"target {hcl(f'{image}-{name}')} {{", *common, "  target = \"runtime\"",
                                f"  tags = [{hcl(plan.tag)}]", "}"]))
        for comp in plan.components:
            lines.append("\n".join([f"target {hcl(f'{image}-{name}-{comp.name}')} {{", *common,
                                    f"  target = {hcl(f'component-{comp.name}')}", "}"]))
    return "\n\n".join(lines) + "\n"
