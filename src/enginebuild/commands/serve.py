"""Serve one image on several nodes (two Sparks over their QSFP link): the same image by digest on
every node, checked there; vLLM's native multi-node executor (or Ray, where the image has it),
llama.cpp's RPC backend; each node's communication environment derived on that node and written
to a file; a preflight whose every failure is one line naming its node and cause; `stop` leaves
no container on any node.

    serve up IMAGE        start the nodes (the first is the head), after the preflight
    serve check IMAGE     the preflight, the nodes' meeting (and vLLM's Gloo rendezvous) and each
                          node's command line, without starting the engine
    serve warm IMAGE      start the nodes with empty compile caches, wait until the engine answers,
                          stop them, push what each node compiled beside the image (`serve up`
                          restores it on a node whose record matches)
    serve lock IMAGE      write a deployment lock (--out FILE): the image by digest, the model's files
                          hashed on the head, the settings, the nodes; with --prompt, the running
                          cluster's greedy answers (`serve up --locked FILE` checks all of it)
    serve bench           measure the running cluster started from --locked FILE with the image's
                          bench.sh; the speeds written beside the lock (FILE.bench.json)
    serve status          each node's container: running or not, and the last line it printed
    serve logs            each node's container's last lines (--tail N, 50 by default)
    serve stop            remove the cluster's containers on every node

IMAGE: REGISTRY/REPO@sha256:DIGEST (pulled by each node where absent), or a local image name
whose ID every node must have (--transfer copies this machine's image to a node that lacks it).
Nodes: `nodes:` in enginebuild.yaml, or --node NAME=ADDRESS[@ENGINE] (ENGINE: unix://, tcp://,
ssh:// or a Docker context; default this machine's). Exit 1 when a node fails, 2 for bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from enginebuild.errors import EXIT_FAILED, UserError
from enginebuild.workspace import Workspace

if TYPE_CHECKING:
    from enginebuild.serving.deployment import Deployment
    from enginebuild.serving.nodes import Node
    from enginebuild.usecases.serving import Request

ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node", action="append", default=[], metavar="NAME=ADDRESS[@ENGINE]",
                        help="a node (repeat; the first is the head); default: `nodes:` in enginebuild.yaml")
    parser.add_argument("--cluster", default="default", metavar="NAME",
                        help="the name of this set of containers (several clusters may share nodes)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    for action, text in (("up", "start the nodes"), ("check", "the preflight and the nodes' meeting, no engine"),
                         ("warm", "start the nodes, capture and push their compile caches once the engine answers"),
                         ("lock", "write a deployment lock: image, model files, settings, nodes, answers")):
        p = sub.add_parser(action, help=text)
        p.add_argument("image", metavar="IMAGE", nargs="?" if action in ("up", "lock") else None,
                       help="the image (serve up --locked: the lock's)")
        _common(p)
        p.add_argument("--model", metavar="PATH", help="the model's folder (or GGUF file) on every node, mounted "
                                                       "read-only at /models/NAME (MODEL_PATH)")
        p.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE",
                       help="a launcher setting for every node (MAX_MODEL_LEN=…, CTX_SIZE=…); secrets such as "
                            "HF_TOKEN are passed from this environment by name, never written")
        p.add_argument("--backend", choices=("native", "ray"), default="native",
                       help="vLLM's multi-node executor: its own (default) or Ray (the image must have it)")
        p.add_argument("--pipeline", action="store_true",
                       help="vLLM: one pipeline stage per node instead of one tensor-parallel group over all")
        p.add_argument("--gpus", choices=("auto", "all", "none"), default="auto",
                       help="give each container the node's GPUs: auto (the default: all where every node's engine "
                            "has the NVIDIA runtime, none where none has), all, or none")
        p.add_argument("--restart", choices=("no", "on-failure", "unless-stopped"), default="no",
                       help="the containers' restart policy once started (on-failure: 3 tries; `serve check` never "
                            "restarts)")
        p.add_argument("--master-port", type=int, default=29500, help="the head's port the nodes meet at (29500)")
        p.add_argument("--rpc-port", type=int, default=50052, help="llama.cpp: the workers' rpc-server port (50052)")
        p.add_argument("--timeout", type=int, default=20, metavar="S",
                       help="the nodes meet within this many seconds, or the cause is named (20)")
        p.add_argument("--transfer", action="store_true",
                       help="copy this machine's image to a node that lacks it (docker save | docker load)")
        p.add_argument("--json", action="store_true", help="each node's plan and lines, machine-readable")
        p.add_argument("--memory", choices=("refuse", "lower"), default="refuse",
                       help="vLLM on unified memory (GB10) whose free figure would fail its start-up check: refuse "
                            "the start, naming the numbers (default), or lower GPU_MEMORY_UTILIZATION to what passes")
        p.add_argument("--drop-caches", action="store_true",
                       help="where that check would fail, drop the node's page cache first (a container with CAP_SYS_ADMIN "
                            "writes /proc/sys/vm/drop_caches: the host's privileges)")
        if action == "lock":
            p.add_argument("--out", required=True, metavar="FILE", help="the deployment lock to write (JSON)")
            p.add_argument("--prompt", action="append", default=[], metavar="TEXT",
                           help="a prompt whose greedy answer the running cluster (--cluster) gives is recorded "
                                "(repeat); without, the answers of FILE are kept where image and model are the same")
            p.add_argument("--max-tokens", type=int, default=16, metavar="N", help="tokens of each answer (16)")
        if action == "up":
            p.add_argument("--locked", metavar="FILE",
                           help="start the deployment lock's image, model, settings and nodes, refusing what differs; "
                                "every node's model files checked; ready when the engine gives the lock's answers")
            p.add_argument("--move-weights", action="store_true",
                           help="with --locked: a node whose model files differ from the lock's receives them from a "
                                "node that holds them (only those files)")
            p.add_argument("--ready-timeout", type=int, default=1800, metavar="S",
                           help="wait this long for the engine to answer /health (and the lock's prompts) (1800)")
            p.add_argument("--no-wait", action="store_true", help="return once every node has started its part")
            p.add_argument("--keep-failed", action="store_true",
                           help="leave the cluster running when its answers are not the lock's (to debug it)")
            p.add_argument("--no-cache", action="store_true",
                           help="restore no compile cache (the image's `compile-cache:` folders start empty)")
            p.add_argument("--key", metavar="PUBLIC.pem",
                           help="restore only compile caches this key signed (`serve warm --sign`)")
        if action == "warm":
            p.add_argument("--ready-timeout", type=int, default=1800, metavar="S",
                           help="how long the engine may take to answer /health on its PORT (1800)")
            p.add_argument("--sign", action="store_true", help="sign each cache pushed (--key or "
                                                               "ENGINEBUILD_SIGNING_KEY, as `push --sign`)")
            p.add_argument("--key", metavar="PRIVATE.pem", help="the signing key for --sign")
    bench = sub.add_parser("bench", help="measure the running locked cluster (bench.sh), recorded beside the lock")
    _common(bench)
    bench.add_argument("--locked", required=True, metavar="FILE", help="the deployment lock it was started from")
    bench.add_argument("-e", "--env", action="append", default=[], metavar="BENCH_KEY=VALUE",
                       help="a bench.sh setting (BENCH_PP, BENCH_TG, BENCH_RUNS, BENCH_CONCURRENCY, BENCH_DEPTH, "
                            "BENCH_BOOK)")
    status = sub.add_parser("status", help="each node's container: running or not, its last line")
    _common(status)
    logs = sub.add_parser("logs", help="each node's container's last lines")
    _common(logs)
    logs.add_argument("--tail", type=int, default=50, metavar="N", help="the last N lines of each node (50)")
    stop = sub.add_parser("stop", help="remove the cluster's containers on every node")
    _common(stop)
    stop.add_argument("--all", action="store_true", help="every cluster's containers on these nodes")


def _port(value: int, flag: str) -> int:
    if not 1 <= value <= 65535:
        raise UserError(f"{flag} {value}: not a TCP port")
    return value


def run(args: argparse.Namespace, ws: Workspace) -> int:
    from enginebuild.usecases import serving

    if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,40}", args.cluster):
        raise UserError(f"--cluster {args.cluster!r}: lower-case letters, digits, _ . - (at most 41)")
    nodes = serving.nodes_of(ws, args.node)
    if args.action == "status":
        return _status(nodes, args.cluster)
    if args.action == "logs":
        return _logs(nodes, args.cluster, args.tail)
    if args.action == "stop":
        removed, left = serving.stop(nodes, None if args.all else args.cluster)
        print(f"serve: removed {removed} container(s) on {len(nodes)} node(s); {left} left")
        return 0 if left == 0 else EXIT_FAILED
    if args.action == "bench":
        return _bench(args, nodes)
    if args.action == "warm":
        return _warm(args, _request(args, nodes))
    locked = _locked(args)
    if not args.image:
        raise UserError(f"serve {args.action}: give the IMAGE (or --locked FILE)")
    request = _request(args, nodes)
    if args.action == "lock":
        return _lock(args, request)
    if locked is not None:
        from enginebuild.usecases.deploying import against_lock

        against_lock(request, locked)
    if args.action == "up":
        request = dataclasses.replace(request, locked=locked, move_weights=args.move_weights,
                                      ready_s=0 if args.no_wait else _ready_timeout(args.ready_timeout),
                                      keep_failed=args.keep_failed)
    return _up(args, request)


def _locked(args: argparse.Namespace) -> Deployment | None:
    """`serve up --locked FILE`: the deployment lock, whose image, model and variables stand where
    the command line gives none."""
    if args.action == "up" and args.locked:
        from enginebuild.serving.deployment import read

        locked = read(Path(args.locked))
        args.image = args.image or locked.image
        args.model = args.model or (locked.model.path if locked.model else None)
        args.env = args.env or [f"{k}={v}" for k, v in locked.env.items()]
        return locked
    if getattr(args, "move_weights", False):
        raise UserError("--move-weights moves the files a deployment lock pins: give --locked FILE")
    return None


BENCH_KEYS = ("BENCH_PP", "BENCH_TG", "BENCH_RUNS", "BENCH_CONCURRENCY", "BENCH_DEPTH", "BENCH_BOOK")


def _bench(args: argparse.Namespace, nodes: tuple[Node, ...]) -> int:
    from enginebuild.serving.driver import ServeFailed
    from enginebuild.usecases.deploying import bench

    settings = {}
    for pair in args.env:
        key, _, value = pair.partition("=")
        if key not in BENCH_KEYS or not re.fullmatch(r"[A-Za-z0-9_./ -]{1,512}", value):
            raise UserError(f"--env {pair!r}: one of {', '.join(BENCH_KEYS)}=VALUE (letters, digits, _ . / - space)")
        settings[key] = value
    try:
        written, runs = bench(nodes, args.cluster, Path(args.locked), settings,
                              lambda line: print(f"serve: {line}", file=sys.stderr))
    except ServeFailed as failed:
        _said(failed.lines)
        return EXIT_FAILED
    for run in runs:
        print(f"pp {run.prompt_size} tg {run.response_size} x{run.concurrency}: {run.pp_tokens_s:.1f} tokens/s "
              f"prompt, {run.tg_tokens_s:.1f} tokens/s generated")
    print(f"serve: wrote {written}")
    return 0


def _said(lines: list[str]) -> None:
    for line in lines:
        print(f"serve: {line}", file=sys.stderr)


def _ready_timeout(value: int) -> int:
    if not 1 <= value <= 86400:
        raise UserError(f"--ready-timeout {value}: between 1 and 86400 seconds")
    return value


def _lock(args: argparse.Namespace, request: Request) -> int:
    from enginebuild.serving.deployment import write
    from enginebuild.serving.driver import ServeFailed
    from enginebuild.usecases.deploying import lock, read_previous

    if not 1 <= args.max_tokens <= 4096:
        raise UserError(f"--max-tokens {args.max_tokens}: between 1 and 4096")
    out = Path(args.out)
    try:
        found = lock(request, args.prompt, args.max_tokens, read_previous(out),
                     lambda line: print(f"serve: {line}", file=sys.stderr))
    except ServeFailed as failed:
        _said(failed.lines)
        return EXIT_FAILED
    write(out, found)
    print(f"serve: wrote {out}: {found.image}, {len(found.nodes)} node(s), "
          f"{len(found.model.files) if found.model else 0} model file(s), {len(found.answers)} answer(s)")
    return 0


def _warm(args: argparse.Namespace, request: Request) -> int:
    from enginebuild.serving.driver import ServeFailed
    from enginebuild.trust.signkeys import load_signer
    from enginebuild.usecases import serving

    _ready_timeout(args.ready_timeout)
    if args.key and not args.sign:
        raise UserError("--key is the signing key of --sign: give --sign too")
    signer = load_signer(args.key) if args.sign else None
    try:
        pushed = serving.warm(request, lambda line: print(f"serve: {line}", file=sys.stderr), signer,
                              args.ready_timeout)
    except ServeFailed as failed:
        _said(failed.lines)
        print(f"serve: nothing of cluster {request.cluster} is left running; no cache was pushed", file=sys.stderr)
        return EXIT_FAILED
    for done in pushed:
        print(f"{done.digest} {done.sent}")
    return 0


def _logs(nodes: tuple[Node, ...], cluster: str, tail: int) -> int:
    from enginebuild.usecases import serving

    if not 1 <= tail <= 100_000:
        raise UserError(f"--tail {tail}: between 1 and 100000 lines")
    found = serving.logs(nodes, cluster, tail)
    for node, lines in found:
        print(f"== {node.name} ({node.address})" + ("" if lines else f": no container of cluster {cluster}"))
        for line in lines:
            print(f"{node.name}: {line}")
    return 0 if all(lines for _, lines in found) else EXIT_FAILED


def _status(nodes: tuple[Node, ...], cluster: str) -> int:
    from enginebuild.usecases import serving

    found = serving.status(nodes, cluster)
    for state in found:
        where = f"{state.node.name} ({state.node.address})"
        if state.container is None:
            print(f"{where}: no container of cluster {cluster}")
        else:
            code = "" if state.exit_code is None else f" (exit {state.exit_code})"
            print(f"{where}: {state.container} {state.status}{code}: {state.last}")
    return 0 if all(s.status == "running" for s in found) else EXIT_FAILED


def _request(args: argparse.Namespace, nodes: tuple[Node, ...]) -> Request:
    from enginebuild.serving.layout import Options
    from enginebuild.usecases.serving import SECRET_NAMES, Request

    env = []
    for pair in args.env:
        if not ENV.fullmatch(pair):
            raise UserError(f"--env {pair!r}: expected KEY=VALUE")
        key, _, value = pair.partition("=")
        if key in SECRET_NAMES:
            raise UserError(f"--env {key}=…: a secret is never given on the command line",
                            hint="export it in this shell: serve passes it to the containers by name")
        if any(c in value for c in "\n\r\0"):
            raise UserError(f"--env {key}=…: the value holds a line break or a NUL (each node's environment is a "
                            "file of one KEY=VALUE a line: it would gain a line)")
        env.append((key, value))
    if args.timeout < 1 or args.timeout > 3600:
        raise UserError(f"--timeout {args.timeout}: between 1 and 3600 seconds")
    options = Options(master_port=_port(args.master_port, "--master-port"), rpc_port=_port(args.rpc_port, "--rpc-port"),
                      backend=args.backend, pipeline=args.pipeline, gpus=args.gpus == "all", deadline_s=args.timeout,
                      gpus_asked=args.gpus, restart=args.restart)
    trust = None
    if getattr(args, "key", None) and args.action == "up":
        from enginebuild.trust.signkeys import KeyTrust, load_public

        trust = KeyTrust(load_public(args.key))
    return Request(args.image, nodes, options, args.cluster, args.model, tuple(env), args.transfer,
                   args.action == "check", restore=not getattr(args, "no_cache", False), trust=trust,
                   memory=args.memory, drop_caches=args.drop_caches)


def _up(args: argparse.Namespace, request: Request) -> int:
    from enginebuild.serving.driver import ServeFailed
    from enginebuild.usecases import serving

    try:
        served = serving.up(request, lambda line: print(f"serve: {line}", file=sys.stderr))
    except ServeFailed as failed:
        _said(failed.lines)
        if isinstance(failed, serving.NotAsLocked) and request.keep_failed:
            print(f"serve: cluster {request.cluster} is left running (--keep-failed): `serve stop --cluster "
                  f"{request.cluster}` removes it", file=sys.stderr)
        else:
            print(f"serve: nothing of cluster {request.cluster} is left running on the {len(request.nodes)} node(s)",
                  file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(serving.describe(served))
        return 0
    for plan in served.layout.nodes:
        for line in served.said.get(plan.node.name, []):
            print(f"{plan.node.name}: {line}")
    head = served.layout.nodes[0].node
    if request.check_only:
        print(f"serve: checked {len(request.nodes)} node(s); `serve up` starts them")
    else:
        state = "ready (it answers" + (f"; {len(served.answers)} answer(s) as locked" if served.answers else "") + ")" \
            if served.ready else "started"
        print(f"serve: {request.image} on {len(request.nodes)} node(s), head {head.name} at {head.address}, {state}; "
              f"`serve stop --cluster {request.cluster}` removes it")
    return 0
