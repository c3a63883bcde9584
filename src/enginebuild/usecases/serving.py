"""Serve one image on several nodes: every node's engine reached, the same image (by ID) on each,
each node's facts read in a container of that image on its network, the plan laid out (family,
backend, parallel sizes, each node's communication environment, written to a file per node), the
preflight's findings named, then the node containers started and watched until every node has
started its part; any failure names its node and cause and leaves no container on any node.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from enginebuild.errors import RegistryError, UserError
from enginebuild.io.files import write_atomic
from enginebuild.oci.engine import Engine
from enginebuild.recipe.repo_settings import load_repo_settings
from enginebuild.serving import answers, caches, driver, memory, weights
from enginebuild.serving.answers import Asked
from enginebuild.serving.deployment import Deployment
from enginebuild.serving.driver import Reached, ServeFailed
from enginebuild.serving.layout import Layout, Options, layout
from enginebuild.serving.nodes import Node, check_node, check_nodes, parse_node
from enginebuild.serving.weights import Checked
from enginebuild.settings import settings
from enginebuild.trust.signkeys import KeyTrust, Signer
from enginebuild.usecases import compilecaches
from enginebuild.wire import JsonDoc
from enginebuild.workspace import Workspace

SECRET_NAMES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "VLLM_API_KEY", "LLAMA_ARG_API_KEY")


@dataclass(frozen=True)
class Request:
    image: str
    nodes: tuple[Node, ...]
    options: Options
    cluster: str = "default"
    model: str | None = None  # a folder (or a file) on every node, mounted read-only at /models/NAME
    env: tuple[tuple[str, str], ...] = ()  # the launcher's settings, the same on every node
    transfer: bool = False  # docker save | docker load where a node lacks the image
    check_only: bool = False  # everything up to the engine's start: meeting, rendezvous, command lines
    restore: bool = True  # the image's compile caches from its registry, where one matches a node
    memory: str = "refuse"  # unified memory whose free figure fails vLLM's check: refuse, or lower the utilization
    drop_caches: bool = False  # drop a unified-memory node's page cache when the check would fail (privileged)
    trust: KeyTrust | None = None  # restore only caches this key signed
    locked: Deployment | None = None  # the deployment lock the start must be: its weights checked, its answers asked
    move_weights: bool = False  # a node whose model files differ from the lock's receives them from one that holds them
    ready_s: float = 0  # wait until the engine answers (and the lock's answers match) for this long; 0: return at start
    keep_failed: bool = False  # a start whose answers differ is left running (for debugging)


@dataclass
class Served:
    layout: Layout
    image_id: str
    env_files: list[Path] = field(default_factory=list)
    said: dict[str, list[str]] = field(default_factory=dict)  # node: its enginebuild-serve lines
    started: list[tuple[Reached, str]] = field(default_factory=list)  # each node's container
    folders: dict[str, str] = field(default_factory=dict)  # the image's compile-cache folders
    engine_args: str = ""  # what the compile caches' records hold of the engine's arguments
    gpus: bool = False  # whether the containers were given the nodes' GPUs
    weights: list[Checked] = field(default_factory=list)  # each node's model files, checked against the lock
    answers: list[Asked] = field(default_factory=list)  # the lock's prompts and the engine's answers
    ready: bool = False  # the engine answered (and every answer was the lock's)


def nodes_of(ws: Workspace, given: list[str]) -> tuple[Node, ...]:
    if given:
        return tuple(check_nodes([parse_node(text) for text in given]))
    entries = load_repo_settings(ws.root).nodes
    return tuple(check_nodes([check_node(Node(e.name, e.address, e.engine, e.network, e.where)) for e in entries]))


def model_mounts(model: str | None) -> tuple[list[str], dict[str, str]]:
    if not model:
        return [], {}
    if not model.startswith("/"):
        raise UserError(f"--model {model}: give the model's absolute path (the same on every node)")
    name = Path(model).name
    return [f"{model}:/models/{name}:ro"], {"MODEL_PATH": f"/models/{name}"}


def _env_files(cluster: str, plans: Layout, env: dict[str, str]) -> list[Path]:
    """Each node's environment as the container gets it (secrets only by name), where the user can read it."""
    folder = settings().home / "serve" / cluster
    written = []
    for plan in plans.nodes:
        lines = [f"# enginebuild serve: {plan.node.name}, rank {plan.rank} (cluster {cluster})"]
        lines += [f"{k}={v}" for k, v in {**env, **plan.env}.items()]
        path = folder / f"{plan.node.name}.env"
        write_atomic(path, ("\n".join(lines) + "\n").encode())
        written.append(path)
    return written


def up(req: Request, say: Callable[[str], None]) -> Served:
    reached = driver.reach(list(req.nodes))
    try:
        return _up(req, reached, say)
    except NotAsLocked:
        if not req.keep_failed:
            driver.stop(reached, req.cluster)
        raise
    except BaseException:  # a failure, or an interrupt: nothing of the cluster is left on any node
        driver.stop(reached, req.cluster)
        raise


def _up(req: Request, reached: list[Reached], say: Callable[[str], None]) -> Served:
    """The layout from the nodes' facts, weights and caches as the lock has them, the containers
    started (workers first), watched, then ready only with the lock's answers."""
    if driver.remaining(reached, req.cluster):
        raise ServeFailed([f"cluster {req.cluster}: its containers run already on these nodes: `serve stop` first"])
    req = dataclasses.replace(req, options=dataclasses.replace(req.options, gpus=_gpus(reached, req.options.gpus_asked)))
    if req.options.gpus_asked == "auto":
        say(f"GPUs: {'given to every node' if req.options.gpus else 'none (no node has the NVIDIA runtime)'} "
            "(--gpus auto)")
    image_id = driver.same_image(reached, req.image, req.transfer)
    say(f"image {req.image}: {image_id[:19]} on every node")
    launcher = driver.launcher_of(reached[0].engine, req.image)
    binds, model_env = model_mounts(req.model)
    found = [driver.facts(each, req.image, req.cluster, req.options.gpus, binds=binds) for each in reached]
    plans = layout(list(req.nodes), found, req.options, launcher)
    if plans.problems:
        raise ServeFailed(list(plans.problems))
    env = {**dict(req.env), **model_env}
    if plans.family == "vllm" and req.options.gpus:
        lowered = _memory(req, reached, found, _utilization(env, reached[0].engine, req.image), say)
        if lowered is not None:
            env["GPU_MEMORY_UTILIZATION"] = f"{lowered:.2f}"
    served = Served(plans, image_id, _env_files(req.cluster, plans, env), gpus=req.options.gpus)
    if req.locked is not None and req.locked.model is not None and not req.check_only:
        _weights_as_locked(req, reached, served, say)
    _say_layout(req, served, say)
    volumes = _compile_caches(req, reached, served, binds, model_env.get("MODEL_PATH", ""), say)
    _start(req, reached, served, env, binds, volumes)
    limit = req.options.deadline_s + (60 if plans.family == "vllm" else 15)  # importing torch takes its time
    failures = driver.watch(served.started, limit, "checked" if req.check_only else "started")
    served.said = {each.node.name: driver.said(each, ident) for each, ident in served.started}
    if failures:
        raise ServeFailed(failures)
    if req.check_only:
        driver.stop(reached, req.cluster)
    elif req.ready_s:
        _ready(req, served, say)
    return served


def _weights_as_locked(req: Request, reached: list[Reached], served: Served, say: Callable[[str], None]) -> None:
    """Every node's copy of the model hashed against the lock; what differs moved when asked."""
    assert req.locked is not None and req.locked.model is not None
    served.weights = weights.check(reached, req.image, req.cluster, req.locked.model, req.move_weights)
    for done in served.weights:
        for line in done.replaced[:20]:
            say(f"{done.node}: model {line}: received from a node that holds the lock's")
        say(f"{done.node}: model: {done.files} file(s) as the lock has them" +
            (f"; {done.moved} received ({done.sent} bytes)" if done.moved else "; 0 bytes moved"))


def _say_layout(req: Request, served: Served, say: Callable[[str], None]) -> None:
    plans = served.layout
    for plan, path in zip(plans.nodes, served.env_files, strict=True):
        role = "head" if plan.rank == 0 else "worker"
        say(f"{plan.node.name}: {role}, rank {plan.rank}, {plan.node.address} on {plan.env['NCCL_SOCKET_IFNAME']}; "
            f"environment in {path}")
    if plans.family == "vllm":
        say(f"vLLM on {len(plans.nodes)} nodes: tensor parallel {plans.tensor_parallel}, pipeline parallel "
            f"{plans.pipeline_parallel}, {'Ray' if req.options.backend == 'ray' else 'native multi-node executor'}")


def _compile_caches(req: Request, reached: list[Reached], served: Served, binds: list[str], model_path: str,
                    say: Callable[[str], None]) -> tuple[JsonDoc, ...]:
    """The image's compile-cache folders: emptied on every node, then restored where a record
    matches (when asked); the volumes the containers mount them from."""
    served.folders = caches.folders_of(reached[0].engine, req.image)
    served.engine_args = compilecaches.engine_args(dict(req.env), served.layout.tensor_parallel,
                                                   served.layout.pipeline_parallel)
    volumes = caches.mounts(req.cluster, served.folders) if served.folders and not req.check_only else ()
    if volumes:
        for each in reached:  # what an earlier start compiled is not kept: only a cache whose record matches is
            caches.clear(each, req.cluster, served.folders)
        if req.restore:
            _restore(req, reached, served, binds, model_path, say)
    return tuple(volumes)


def _start(req: Request, reached: list[Reached], served: Served, env: dict[str, str], binds: list[str],
           volumes: tuple[JsonDoc, ...]) -> None:
    """Each node's container, the workers first and the head last; `served.started` head first."""
    secrets = tuple(name for name in SECRET_NAMES if name in os.environ)
    started = []
    for each, plan in sorted(zip(reached, served.layout.nodes, strict=True), key=lambda pair: -pair[1].rank):
        join = {**plan.join, "check_only": req.check_only}
        ident = driver.start(each, req.image, req.cluster, {**env, **plan.env}, join, req.options.gpus, binds,
                             plan.devices, secrets, "no" if req.check_only else req.options.restart, volumes)
        started.append((each, ident))
    started.reverse()
    served.started = started


class NotAsLocked(ServeFailed):
    """The engine answered, not as the lock says; the cluster is left running where asked."""


def _ready(req: Request, served: Served, say: Callable[[str], None]) -> None:
    """Wait until the head's engine answers (a node whose container ended is named with its last
    lines), then ask the lock's prompts: ready only when every answer is the lock's."""
    failures = driver.wait_ready(served.started, req.ready_s)
    if failures:
        raise ServeFailed(failures)
    locked = req.locked.answers if req.locked is not None else ()
    if locked:
        head, ident = served.started[0]
        served.answers = answers.asked(head, ident, locked)
        wrong = answers.mismatches(served.answers)
        if wrong:
            raise NotAsLocked(wrong)
        say(f"answers: {len(locked)} of {len(locked)} as the lock has them")
    served.ready = True


def _utilization(env: dict[str, str], engine: Engine, image: str) -> float:
    """The GPU_MEMORY_UTILIZATION the launcher will give vLLM: --env's, else the image's, else vLLM's default."""
    found = env.get("GPU_MEMORY_UTILIZATION")
    if found is None:
        listed = ((engine.inspect(image) or {}).get("Config") or {}).get("Env") or []
        found = next((v.split("=", 1)[1] for v in listed if v.startswith("GPU_MEMORY_UTILIZATION=")), None)
    try:
        asked = float(found) if found is not None else memory.DEFAULT_UTILIZATION
    except ValueError:
        raise UserError(f"GPU_MEMORY_UTILIZATION={found!r}: not a number such as 0.85") from None
    if not 0 < asked <= 1:
        raise UserError(f"GPU_MEMORY_UTILIZATION={found}: between 0 and 1")
    return asked


def _memory(req: Request, reached: list[Reached], found: list[JsonDoc], asked: float,
            say: Callable[[str], None]) -> float | None:
    """vLLM's start-up check, computed before loading on every node whose GPU shares the system's
    memory: the page cache dropped where asked, the utilization lowered where asked (returned),
    else the start refused with the numbers."""
    lowered: float | None = None
    problems = []
    for each, facts in zip(reached, found, strict=True):
        if not facts.get("unified") or not facts.get("memory"):
            continue
        verdict = memory.check(memory.Memory(**facts["memory"]), asked)
        if not verdict.passes and req.drop_caches:
            say(f"{each.node.name}: {verdict.line}; dropping its page cache (--drop-caches)")
            verdict = memory.check(memory.parse_meminfo(driver.meminfo(each, req.image, req.cluster, drop=True)), asked)
        if verdict.passes:
            say(f"{each.node.name}: {verdict.line}")
        elif req.memory == "lower" and verdict.utilization > 0:
            lowered = min(lowered or 1.0, verdict.utilization)
            say(f"{each.node.name}: {verdict.line}; GPU_MEMORY_UTILIZATION lowered to {lowered:.2f} (--memory lower)")
        else:
            problems.append(f"{each.node.name}: {verdict.line}: --drop-caches frees the page cache (CAP_SYS_ADMIN in a "
                            "container: the host's privileges), --memory lower starts with what passes")
    if problems:
        raise ServeFailed(problems)
    return lowered


def _restore(req: Request, reached: list[Reached], served: Served, binds: list[str], model: str,
             say: Callable[[str], None]) -> None:
    """Each node's cache volumes filled from the image's compile cache whose record is the node's."""
    try:
        ref = compilecaches.pinned_image(req.image)
    except UserError:
        say("compile caches: none restored (the image is not given as REGISTRY/REPO@sha256:DIGEST, where its "
            "caches are kept): each node compiles at its start")
        return
    found = compilecaches.caches_of(ref)
    for each in reached:
        here = caches.record(each, req.image, req.cluster, req.options.gpus, binds, model, served.engine_args)
        pick, refused = compilecaches.chosen(found, here)
        for line in refused:
            say(f"{each.node.name}: compile cache {line}: not restored")
        if pick is None:
            say(f"{each.node.name}: no compile cache of this image was made under this node's record: its engine "
                "compiles at its start (`serve warm` keeps what it compiles)")
            continue
        try:
            archive = compilecaches.fetched(ref, pick, req.trust)
        except RegistryError as exc:  # unsigned, another key's, changed bytes: refused, the node compiles
            say(f"{each.node.name}: {exc.message}: not restored")
            continue
        try:
            count, why = caches.restore(each, req.image, served.folders, req.cluster, req.options.gpus, binds, model,
                                        served.engine_args, archive)
        finally:
            archive.unlink(missing_ok=True)
        say(f"{each.node.name}: compile cache {pick.digest[:19]} refused: {why}" if why else
            f"{each.node.name}: compile cache {pick.digest[:19]} restored ({count} files into "
            f"{', '.join(served.folders.values())})")


def warm(req: Request, say: Callable[[str], None], signer: Signer | None, ready_s: float) -> list[compilecaches.Pushed]:
    """Start the cluster with empty cache volumes, wait until its engine answers, stop it, then
    capture each node's caches and push them beside the image (signed with `signer`)."""
    ref = compilecaches.pinned_image(req.image)
    reached = driver.reach(list(req.nodes))
    try:
        served = _up(dataclasses.replace(req, restore=False, check_only=False), reached, say)
        if not served.folders:
            raise UserError(f"{req.image} declares no compile-cache folders (`compile-cache:` in its spec): "
                            "nothing to warm")
        failures = driver.wait_ready(served.started, ready_s)
        if failures:
            raise ServeFailed(failures)
        say(f"the engine answers: warmed in {ready_s:.0f} s or less; stopping it to capture its caches")
    finally:
        driver.stop(reached, req.cluster)
    binds, model_env = model_mounts(req.model)
    pushed = []
    with tempfile.TemporaryDirectory(prefix="enginebuild-warm-") as folder:
        for each in reached:
            archive = Path(folder) / f"{each.node.name}.tar.gz"
            said = caches.capture(each, req.image, served.folders, req.cluster, served.gpus, binds,
                                  model_env.get("MODEL_PATH", ""), served.engine_args, archive)
            record = {str(k): str(v) for k, v in (said.get("record") or {}).items()}
            done = compilecaches.push(ref, archive, record, signer)
            say(f"{each.node.name}: compile cache {done.digest[:19]}: {said.get('files')} files, "
                f"{int(said.get('size') or 0) / 2**20:.1f} MiB, {done.sent} bytes pushed"
                + (" (the registry had it)" if done.sent == 0 else ""))
            pushed.append(done)
    return pushed


def _gpus(reached: list[Reached], asked: str) -> bool:
    """Whether the containers get GPUs: `all` where every node's engine has the NVIDIA runtime (else
    refused naming those that lack it), `none`, or `auto`: all when every node has it, none when
    none has, refused when only some have."""
    if asked == "none":
        return False
    lacking = [each.node.name for each in reached if not driver.has_nvidia(each)]
    if asked == "all" and lacking:
        raise ServeFailed([f"{name}: its Docker engine has no NVIDIA runtime (docker info: Runtimes): --gpus all "
                           "cannot be given there; --gpus none serves without GPUs" for name in lacking])
    if asked == "auto" and lacking and len(lacking) < len(reached):
        raise ServeFailed([f"{name}: its Docker engine has no NVIDIA runtime, as other nodes' have: give --gpus all "
                           "(after installing the NVIDIA container toolkit there) or --gpus none" for name in lacking])
    return not lacking


def logs(nodes: tuple[Node, ...], cluster: str, tail: int) -> list[tuple[Node, list[str]]]:
    return driver.logs(driver.reach(list(nodes)), cluster, tail)


def stop(nodes: tuple[Node, ...], cluster: str | None) -> tuple[int, int]:
    """Every container of the cluster removed on every node: (removed, left)."""
    reached = driver.reach(list(nodes))
    removed = driver.stop(reached, cluster)
    return removed, (driver.remaining(reached, cluster) if cluster else 0)


def status(nodes: tuple[Node, ...], cluster: str) -> list[driver.NodeState]:
    return driver.states(driver.reach(list(nodes)), cluster)


def describe(served: Served) -> str:
    return json.dumps({"family": served.layout.family, "image": served.image_id,
                       "tensor_parallel": served.layout.tensor_parallel,
                       "pipeline_parallel": served.layout.pipeline_parallel,
                       "nodes": [{"name": p.node.name, "rank": p.rank, "address": p.node.address, "env": p.env,
                                  "said": served.said.get(p.node.name, [])} for p in served.layout.nodes]}, indent=2)
