"""`serve lock`: a deployment pinned (serving/deployment.py) from what a start would use; the
check a `serve up --locked` start makes of its request against the lock, before anything runs;
and `serve bench`: the speeds of a locked deployment, recorded beside its lock."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from enginebuild.errors import UserError
from enginebuild.serving import answers, benchrecord, driver, weights
from enginebuild.serving.deployment import Answer, Deployment, ModelPin, differences, hub_names, read
from enginebuild.serving.driver import Reached, ServeFailed
from enginebuild.serving.nodes import Node
from enginebuild.usecases.serving import SECRET_NAMES, Request, model_mounts


def described(req: Request, head: Reached | None = None) -> Deployment:
    """The deployment a start of `req` is: the image by digest, the nodes and their roles, the
    model's files as the `head` holds them (hashed there; without a head, no file listed), the
    launcher's settings, the secrets this shell would pass (by name)."""
    if "@sha256:" not in req.image:
        raise UserError(f"{req.image}: a deployment lock pins the image by digest",
                        hint="give REGISTRY/REPO@sha256:DIGEST (`push` prints it)")
    model = None
    if req.model:
        model_mounts(req.model)  # an absolute path, or refused
        files: dict[str, tuple[int, str]] = {}
        if head is not None:
            found = weights.listing(head, req.image, req.cluster, req.model)
            if found is None:
                raise ServeFailed([f"{head.node.name}: --model {req.model}: no such folder on this node"])
            files = found
        repository, revision = hub_names(req.model)
        model = ModelPin(req.model, files, repository, revision)
    nodes = tuple((n.name, n.address, "head" if i == 0 else "worker") for i, n in enumerate(req.nodes))
    secrets = tuple(name for name in SECRET_NAMES if name in os.environ)
    return Deployment(req.image, nodes, model, dict(req.env), secrets)


def lock(req: Request, prompts: list[str], max_tokens: int, previous: Deployment | None,
         say: Callable[[str], None]) -> Deployment:
    """The lock of `req`; with prompts, each answered by the running cluster (`serve up` first);
    without, the answers of the `previous` lock kept where it pinned the same image and model."""
    head = driver.reach([req.nodes[0]])[0]
    found = described(req, head)
    if found.model is not None:
        size = sum(s for s, _ in found.model.files.values())
        say(f"model: {len(found.model.files)} file(s), {size} bytes, hashed on {req.nodes[0].name}")
    if prompts:
        (state,) = driver.states([head], req.cluster)
        ident = state.container
        if ident is None or state.status != "running":
            raise UserError(f"cluster {req.cluster}: not running on {req.nodes[0].name}: the answers are recorded "
                            "from a running start (`serve up` with the same settings first)")
        got = [Answer(p, max_tokens, answers.ask(head, ident, p, max_tokens)) for p in prompts]
        say(f"answers: {len(got)} recorded from cluster {req.cluster} (greedy, {max_tokens} token(s) each)")
        return Deployment(found.image, found.nodes, found.model, found.env, found.secrets, tuple(got))
    if previous is not None and previous.answers:
        if previous.image == found.image and previous.model == found.model:
            say(f"answers: the {len(previous.answers)} of the lock kept (the same image and model)")
            return Deployment(found.image, found.nodes, found.model, found.env, found.secrets, previous.answers)
        say(f"answers: the {len(previous.answers)} of the lock dropped: its image or model changed "
            "(--prompt records new ones)")
    return found


def against_lock(req: Request, locked: Deployment) -> None:
    """A start that is not the lock's is refused, every difference named."""
    wrong = differences(locked, described(req))
    if wrong:
        raise UserError("serve up --locked: this start is not the lock's:\n  " + "\n  ".join(wrong),
                        hint="start it as the lock says, or write the lock again (`serve lock`)")


def read_previous(path: Path) -> Deployment | None:
    return read(path) if path.is_file() else None


def bench(nodes: tuple[Node, ...], cluster: str, lock_path: Path, settings: dict[str, str],
          say: Callable[[str], None]) -> tuple[Path, list[benchrecord.Run]]:
    """The running cluster, started from the lock, measured by the image's bench.sh; the record
    written beside the lock."""

    locked = read(lock_path)
    asked = tuple((n.name, n.address, "head" if i == 0 else "worker") for i, n in enumerate(nodes))
    if asked != locked.nodes:
        raise UserError(f"serve bench: these nodes are not the lock's ({lock_path})",
                        hint="the nodes of enginebuild.yaml or --node, as `serve up --locked` started them")
    head = driver.reach([nodes[0]])[0]
    (state,) = driver.states([head], cluster)
    if state.container is None or state.status != "running":
        raise UserError(f"cluster {cluster}: not running on {head.node.name}: `serve up --locked {lock_path}` first")
    say(f"bench: {benchrecord.BENCH} in {state.container} ({', '.join(f'{k}={v}' for k, v in settings.items())})")
    runs = benchrecord.measured(head, state.container, settings)
    return benchrecord.write(lock_path, benchrecord.record(locked, settings, runs)), runs
