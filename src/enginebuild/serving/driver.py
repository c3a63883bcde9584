"""The served cluster's containers, on each node's Docker engine (through the engine's API, as
builders are reached): the image made present and the same on every node, each node's facts read
in a container of that image, the node containers started, watched until every node has started
its part or one has failed, and removed by `stop`.

Every container this makes is labelled `org.enginebuild.serve=CLUSTER`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from enginebuild.errors import EngineBuildError, UserError, shown_line
from enginebuild.oci.endpoint import Endpoint, local_endpoint, parse_endpoint
from enginebuild.oci.engine import Engine
from enginebuild.oci.output import read_output
from enginebuild.serving.layout import checked_facts
from enginebuild.serving.nodes import Node
from enginebuild.wire import JsonDoc, loads

LABEL = "org.enginebuild.serve"
PROGRAM = (Path(__file__).with_name("nodeside.py")).read_text
MARK = "enginebuild-serve:"
TAKE_LIMIT = 64 << 30  # the most a file copied out of a node's helper container may hold (a compile cache)
SAID_LIMIT = 16384  # characters of one line the node's program said (its engine's command line among them)


class ServeFailed(EngineBuildError):
    """One or more nodes failed; `lines` name each node and cause."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass
class Reached:
    node: Node
    engine: Engine


def endpoint_of(node: Node) -> Endpoint:
    return parse_endpoint(node.engine, f"{node.where}: engine") if node.engine else local_endpoint()


def reach_one(name: str, address: str, engine: str, network: str) -> tuple[Reached | None, str]:
    """One node of enginebuild.yaml, reached: (it, "") or (None, why its engine does not answer)."""
    node = Node(name, address, engine, network)
    try:
        each = Reached(node, Engine(endpoint_of(node), timeout=10))
    except UserError as exc:
        return None, exc.message
    why = each.engine.unreachable()
    return (None, why) if why else (each, "")


def reach(nodes: list[Node]) -> list[Reached]:
    """Each node's engine, asked to answer; every one that does not is named."""
    reached, lines = [], []
    for node in nodes:
        engine = Engine(endpoint_of(node), timeout=30)
        why = engine.unreachable()
        if why:
            lines.append(f"{node.name}: its Docker engine ({engine.endpoint.describe()}) does not answer: {why}")
        reached.append(Reached(node, engine))
    if lines:
        raise ServeFailed(lines)
    return reached


def _platform(doc: JsonDoc) -> str:
    return f"{doc.get('Os', 'linux')}/{doc.get('Architecture', '?')}"


def same_image(reached: list[Reached], ref: str, transfer: bool) -> str:
    """The image on every node, the same one: a digest reference is pulled where it is absent
    (or copied from this machine with `transfer`); a name must name the same image ID on every
    node (`transfer` copies this machine's where it differs). Returns the image ID."""
    pinned = "@sha256:" in ref
    local = Engine(local_endpoint())
    wanted: dict[str, str] = {}  # platform: image ID
    if not pinned:
        here = local.inspect(ref)
        if not here:
            raise UserError(f"serve: no image {ref} on this machine's engine",
                            hint="build it (`image NAME`), or serve REGISTRY/REPO@sha256:DIGEST")
        wanted[_platform(here)] = str(here["Id"])
    lines = []
    for each in reached:
        found = each.engine.inspect(ref)
        if found is None and pinned and not transfer:
            try:
                each.engine.pull(ref)
            except EngineBuildError as exc:
                raise ServeFailed([f"{each.node.name}: cannot pull {ref}: {exc.message} (--transfer copies this "
                                   f"machine's image over the engine's connection)"]) from None
            found = each.engine.inspect(ref)
        if (found is None or (not pinned and str(found["Id"]) not in wanted.values())) and transfer:
            _transfer(local, each.engine, ref)
            found = each.engine.inspect(ref)
        if found is None:
            lines.append(f"{each.node.name}: no image {ref} on its engine ({each.engine.endpoint.describe()}): "
                         f"push it and serve it by digest, or --transfer")
            continue
        ident, platform = str(found["Id"]), _platform(found)
        first = wanted.setdefault(platform, ident)
        if ident != first:
            lines.append(f"{each.node.name}: {ref} is image {ident[:19]} there, {first[:19]} on {reached[0].node.name}: "
                         f"the digest differs between nodes (serve REGISTRY/REPO@sha256:DIGEST, or --transfer)")
    if lines:
        raise ServeFailed(lines)
    if len(wanted) > 1:
        raise ServeFailed([f"the nodes are of different platforms ({', '.join(sorted(wanted))}): one image "
                           f"digest cannot hold the same bytes for all"])
    return next(iter(wanted.values()))


def _transfer(source: Engine, target: Engine, ref: str) -> None:
    """`docker save` here, `docker load` there, spooled through a file (the engine wants its length)."""
    with tempfile.TemporaryFile(dir=os.environ.get("TMPDIR")) as spool:
        with source.save(ref) as stream:
            while chunk := stream.read(1 << 20):
                spool.write(chunk)
        size = spool.tell()
        spool.seek(0)
        target.load(iter(lambda: spool.read(1 << 20), b""), size)


def launcher_of(engine: Engine, ref: str) -> list[str]:
    config = (engine.inspect(ref) or {}).get("Config") or {}
    argv = list(config.get("Entrypoint") or []) + list(config.get("Cmd") or [])
    if not argv:
        raise UserError(f"serve: {ref} has neither an entrypoint nor a command: nothing to launch")
    return argv


def bind_mounts(binds: list[str]) -> list[JsonDoc]:
    """`SOURCE:TARGET[:ro]` as mounts of type bind: a source missing on the node is refused by its
    engine (as `Binds` it would be made, an empty folder, on the node's host)."""
    out = []
    for bind in binds:
        source, target, *mode = bind.split(":")
        out.append({"Type": "bind", "Source": source, "Target": target, "ReadOnly": mode == ["ro"]})
    return out


def _host_config(node: Node, gpus: bool, binds: list[str], devices: tuple[str, ...], restart: str = "no",
                 volumes: tuple[JsonDoc, ...] = ()) -> JsonDoc:
    host: JsonDoc = {"NetworkMode": node.network, "Mounts": bind_mounts(binds) + list(volumes),
                     "IpcMode": "host" if node.network == "host" else ""}
    if restart != "no":
        host["RestartPolicy"] = {"Name": restart, **({"MaximumRetryCount": 3} if restart == "on-failure" else {})}
    if gpus:
        host["DeviceRequests"] = [{"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]]}]
    if devices:
        host["Devices"] = [{"PathOnHost": d, "PathInContainer": d, "CgroupPermissions": "rwm"} for d in devices]
        host["CapAdd"] = ["IPC_LOCK"]  # RDMA registers memory: locked without limit
        host["Ulimits"] = [{"Name": "memlock", "Soft": -1, "Hard": -1}]
    return host


def _networking(node: Node) -> JsonDoc:
    if node.network == "host" or node.network.startswith("container:"):
        return {}
    key = "IPv6Address" if ":" in node.address else "IPv4Address"
    return {"NetworkingConfig": {"EndpointsConfig": {node.network: {"IPAMConfig": {key: node.address}}}}}


def create(engine: Engine, body: JsonDoc, name: str | None = None) -> str:
    params = {"name": name} if name else None
    try:
        created = engine.call("POST", "/containers/create", params, body=json.dumps(body).encode(),
                              headers={"Content-Type": "application/json"})
    except EngineBuildError as exc:
        raise ServeFailed([f"cannot create a container: {exc.message}"]) from None
    if not created:
        raise ServeFailed([f"cannot create a container of {body['Image']}"])
    return str(created["Id"])


def _start(engine: Engine, ident: str, node: Node) -> None:
    try:
        engine.call("POST", f"/containers/{ident}/start")
    except EngineBuildError as exc:
        remove(engine, ident)
        raise ServeFailed([f"{node.name}: the engine cannot start its container: {exc.message}"]) from None


def remove(engine: Engine, ident: str) -> None:
    with contextlib.suppress(EngineBuildError):
        engine.call("DELETE", f"/containers/{ident}", {"force": "1", "v": "1"})


def _logs(engine: Engine, ident: str, tail: int | None = None) -> str:
    """What a container printed from its start (the node program's lines come first), or its last
    `tail` lines; at most 1 MiB either way: a container of an image another party wrote may print
    without end."""
    printed = engine.logs(ident, tail)
    return (printed.out + printed.err).decode("utf-8", "replace")


def _state(engine: Engine, ident: str) -> JsonDoc:
    return dict((engine.call("GET", f"/containers/{ident}/json") or {}).get("State") or {})


def facts(each: Reached, image: str, cluster: str, gpus: bool, limit_s: float = 30, binds: list[str] | None = None) -> JsonDoc:
    """What the node says of itself, from a container of the image on its network, with the mounts
    the node's part will have (a model path missing on the node is named here, before anything runs)."""
    body = {"Image": image, "Entrypoint": ["python3"], "Cmd": ["-c", PROGRAM(), "facts", each.node.address],
            "Labels": {LABEL: cluster}, "HostConfig": _host_config(each.node, gpus, binds or [], ()),
            **_networking(each.node)}
    try:
        ident = create(each.engine, body)
    except ServeFailed as failed:
        said = " ".join(failed.lines)
        sources = [b.split(":")[0] for b in binds or []]
        missing = next((s for s in sources if s in said), None) if "does not exist" in said else None
        if missing:
            raise ServeFailed([f"{each.node.name}: --model {missing}: no such file or folder on this node (its engine "
                               "refused the mount; nothing was created there)"]) from None
        raise
    try:
        _start(each.engine, ident, each.node)
        deadline = time.monotonic() + limit_s
        while (state := _state(each.engine, ident)).get("Running") or state.get("Status") == "created":
            if time.monotonic() > deadline:
                raise ServeFailed([f"{each.node.name}: reading its facts took over {limit_s:.0f} s"])
            time.sleep(0.1)
        said = _logs(each.engine, ident)
    finally:
        remove(each.engine, ident)
    for line in reversed(said.splitlines()):
        if line.startswith("{"):
            try:
                return checked_facts(loads(line))
            except (ValueError, TypeError) as exc:  # what a container of the image printed: read as hostile
                raise ServeFailed([f"{each.node.name}: what the image said of the node is not its facts: "
                                   f"{shown_line(str(exc))}"]) \
                    from None
    raise ServeFailed([f"{each.node.name}: the image's python3 could not read the node's facts: "
                       f"{shown_line(said.strip()[-400:]) or 'no output (has the image a python3?)'}"])


def helper(each: Reached, image: str, argv: list[str], gpus: bool, binds: list[str], volumes: tuple[JsonDoc, ...],
           cluster: str, limit_s: float, put: tuple[str, bytes | Path] | None = None,
           take: Path | None = None, taken: str = "", privileged: bool = False) -> str:
    """Run `python3 ARGV` in a container of the image on the node (its mounts, its GPUs, no network),
    `put` (a folder in the container, a tar's bytes or file) unpacked there first; the container's
    file `taken` copied to `take` once it ended with status 0. What it printed, at most 1 MiB."""
    body = {"Image": image, "Entrypoint": ["python3"], "Cmd": argv, "Labels": {LABEL: cluster},
            "User": "0", "NetworkDisabled": True,
            "HostConfig": {**_host_config(each.node, gpus, binds, (), "no", volumes), "NetworkMode": "none",
                           # the one capability /proc/sys/vm/drop_caches asks, and /proc/sys writable:
                           # `--cap-add SYS_ADMIN --security-opt systempaths=unconfined`, not --privileged
                           **({"CapAdd": ["SYS_ADMIN"], "MaskedPaths": [], "ReadonlyPaths": []} if privileged else {})}}
    ident = create(each.engine, body)
    try:
        if put is not None:
            folder, data = put
            handle = open(data, "rb") if isinstance(data, Path) else io.BytesIO(data)
            with handle:
                size = data.stat().st_size if isinstance(data, Path) else len(data)
                with each.engine.open("PUT", f"/containers/{ident}/archive", {"path": folder}, body=handle,
                                      timeout=3600, headers={"Content-Type": "application/x-tar",
                                                             "Content-Length": str(size)}) as response:
                    response.read()
        _start(each.engine, ident, each.node)
        deadline = time.monotonic() + limit_s
        while (state := _state(each.engine, ident)).get("Running") or state.get("Status") == "created":
            if time.monotonic() > deadline:
                raise ServeFailed([f"{each.node.name}: {argv[-1][:60]} in a container of the image ran past "
                                   f"{limit_s:.0f} s"])
            time.sleep(0.2)
        said = _logs(each.engine, ident)
        if take is not None and state.get("ExitCode") == 0:
            with each.engine.archive(ident, taken) as stream:
                if stream is None:
                    raise ServeFailed([f"{each.node.name}: the container left no {taken}"])
                with tarfile.open(fileobj=stream, mode="r|") as tar:
                    member = next(iter(tar), None)
                    source = tar.extractfile(member) if member is not None and member.isreg() else None
                    if source is None or member is None or member.size > TAKE_LIMIT:
                        raise ServeFailed([f"{each.node.name}: {taken} in the container is not a file of at most "
                                           f"{TAKE_LIMIT >> 30} GiB"])
                    with open(take, "wb") as out:
                        shutil.copyfileobj(source, out, 1 << 20)
        return said
    finally:
        remove(each.engine, ident)


MEMINFO = "import sys; sys.stdout.write(open('/proc/meminfo').read())"
DROP = ("import os\nos.sync()\nwith open('/proc/sys/vm/drop_caches', 'w') as f:\n    f.write('3')\n"
        "print(open('/proc/meminfo').read())")


def meminfo(each: Reached, image: str, cluster: str, drop: bool = False) -> str:
    """The node's /proc/meminfo, read in a container of the image; with `drop`, after the kernel
    dropped its page cache (a container with CAP_SYS_ADMIN and /proc/sys writable writes
    /proc/sys/vm/drop_caches: the host's privileges, which the node's engine grants or refuses)."""
    said = helper(each, image, ["-c", DROP if drop else MEMINFO], False, [], (), cluster, 120, privileged=drop)
    if "MemTotal:" not in said:
        what = ("dropping the page cache failed (a container with CAP_SYS_ADMIN and /proc/sys writable: the engine "
                "must allow it)") if drop else "no /proc/meminfo"
        raise ServeFailed([f"{each.node.name}: {what}: {shown_line(said.strip()[-300:])}"])
    return said


def container_name(cluster: str, node: Node) -> str:
    return f"enginebuild-serve-{cluster}-{node.name}"


def start(each: Reached, image: str, cluster: str, env: dict[str, str], join: JsonDoc, gpus: bool,
          binds: list[str], devices: tuple[str, ...], secrets: tuple[str, ...], restart: str = "no",
          volumes: tuple[JsonDoc, ...] = ()) -> str:
    """The node's container: nodeside.py's `join`, then the node's part. Secrets are named in the
    container's environment from this process's (never written to a file or a log here)."""
    values = [f"{k}={v}" for k, v in env.items()] + [f"{k}={os.environ[k]}" for k in secrets if k in os.environ]
    values.append("ENGINEBUILD_SERVE=" + json.dumps(join))
    body = {"Image": image, "Entrypoint": ["python3"], "Cmd": ["-c", PROGRAM(), "join"], "Env": values,
            "Labels": {LABEL: cluster, f"{LABEL}.node": each.node.name, f"{LABEL}.rank": str(join["rank"])},
            "HostConfig": _host_config(each.node, gpus, binds, devices, restart, volumes), "StopSignal": "SIGTERM",
            **_networking(each.node)}
    name = container_name(cluster, each.node)
    if each.engine.call("GET", f"/containers/{name}/json"):
        raise ServeFailed([f"{each.node.name}: a container {name} exists already: `serve stop` first"])
    ident = create(each.engine, body, name)
    _start(each.engine, ident, each.node)
    return ident


def watch(started: list[tuple[Reached, str]], limit_s: float, until: str) -> list[str]:
    """Wait until every node has printed `until` (started, checked) or one failed; returns the
    failure lines (empty: all are there). A node that exits without its FAIL line is named with
    the last lines it printed."""
    deadline = time.monotonic() + limit_s
    pending = dict(enumerate(started))
    failures: list[str] = []
    while pending and time.monotonic() < deadline:
        if failures:  # the other nodes' causes, for a few seconds more: the first failure may follow from them
            deadline = min(deadline, time.monotonic() + 4)
        for index, (each, ident) in list(pending.items()):
            state = _state(each.engine, ident)
            said = _logs(each.engine, ident) if state else ""
            marks = [line[len(MARK):].strip() for line in said.splitlines() if line.startswith(MARK)]
            failed = [m[5:] for m in marks if m.startswith("FAIL ")]
            if failed:
                failures.append(f"{each.node.name} ({each.node.address}): {shown_line(failed[0])}")
            elif any(m.startswith(until) for m in marks) and (until != "checked" or not state.get("Running")):
                pass
            elif not state or state.get("Status") in ("exited", "dead"):
                tail = " | ".join(shown_line(line, 200) for line in said.strip().splitlines()[-3:]) or "no output"
                failures.append(f"{each.node.name} ({each.node.address}): its container ended "
                                f"(exit {state.get('ExitCode', '?')}): {tail}")
            else:
                continue
            del pending[index]
        time.sleep(0.2)
    if pending and not failures:
        failures += [f"{each.node.name} ({each.node.address}): not started within {limit_s:.0f} s"
                     for each, _ in pending.values()]
    # a worker's own cause before the head's "did not reach", which follows from it
    return sorted(failures, key=lambda line: "did not reach the master port" in line)


READY = ("import os, sys, urllib.request\n"
         "port = os.environ.get('PORT', '8000')\n"
         "try:\n"
         "    urllib.request.urlopen(f'http://127.0.0.1:{port}/health', timeout=5).read()\n"
         "except Exception as exc:\n"
         "    print(exc); sys.exit(1)\n")


def exec_in(engine: Engine, ident: str, argv: list[str], limit_s: float, env: tuple[str, ...] = ()) -> tuple[int | None, str]:
    """`docker exec` of argv (with `env`, KEY=VALUE) in a running container: its exit status (None:
    still running after limit_s) and what it printed (at most 1 MiB)."""
    made = engine.call("POST", f"/containers/{ident}/exec", body=json.dumps({"Cmd": argv, "Env": list(env),
        "AttachStdout": True, "AttachStderr": True}).encode(), headers={"Content-Type": "application/json"})
    if not made:
        return None, ""
    run = str(made["Id"])
    with engine.open("POST", f"/exec/{run}/start", body=json.dumps({"Detach": False}).encode(),
                     headers={"Content-Type": "application/json"}, timeout=limit_s) as response:
        printed = read_output(response)
    found = engine.call("GET", f"/exec/{run}/json") or {}
    text = (printed.out + printed.err).decode("utf-8", "replace")
    return (None if found.get("Running") else int(found.get("ExitCode", -1))), text


def wait_ready(started: list[tuple[Reached, str]], limit_s: float) -> list[str]:
    """Wait until the head's engine answers `GET /health` on its PORT (vLLM's and llama-server's
    readiness), asked inside its container; the failure lines (empty: ready). A node whose
    container ended is named with its last lines."""
    deadline = time.monotonic() + limit_s
    head, ident = started[0]
    while time.monotonic() < deadline:
        for each, other in started:
            state = _state(each.engine, other)
            if not state or state.get("Status") in ("exited", "dead"):
                tail = " | ".join(shown_line(line, 200) for line in _logs(each.engine, other).strip().splitlines()[-3:])
                return [f"{each.node.name} ({each.node.address}): its container ended before the engine was ready "
                        f"(exit {state.get('ExitCode', '?')}): {tail or 'no output'}"]
        with contextlib.suppress(EngineBuildError):
            if exec_in(head.engine, ident, ["python3", "-c", READY], 30)[0] == 0:
                return []
        time.sleep(1)
    return [f"{head.node.name} ({head.node.address}): the engine did not answer /health within {limit_s:.0f} s"]


def said(each: Reached, ident: str) -> list[str]:
    """The lines the node's program printed (its own, not the engine's)."""
    try:
        text = _logs(each.engine, ident)
    except EngineBuildError:
        return []
    # a node's command line (a long vLLM one) whole; still escaped and capped
    return [shown_line(line[len(MARK):], SAID_LIMIT) for line in text.splitlines() if line.startswith(MARK)]


def _engines(reached: list[Reached]) -> list[Engine]:
    """Each engine once (nodes may share one)."""
    return list({each.engine.host: each.engine for each in reached}.values())


def _cluster(engine: Engine, cluster: str | None) -> list[str]:
    """The IDs of the cluster's containers (any cluster's: None) on an engine."""
    wanted = f"{LABEL}={cluster}" if cluster else LABEL
    found = engine.call("GET", "/containers/json", {"all": "1", "filters": json.dumps({"label": [wanted]})}) or []
    return [str(container["Id"]) for container in found]


def stop(reached: list[Reached], cluster: str | None) -> int:
    """Remove every container of the cluster (of any cluster: None) on every node; how many were."""
    removed = 0
    for engine in _engines(reached):
        for ident in _cluster(engine, cluster):
            remove(engine, ident)
            removed += 1
    return removed


@dataclass(frozen=True)
class NodeState:
    node: Node
    container: str | None  # its name; None: the node runs no container of the cluster
    status: str = "absent"  # running, exited, ...
    exit_code: int | None = None
    last: str = ""  # the last line it printed


def states(reached: list[Reached], cluster: str) -> list[NodeState]:
    """Each node's container of the cluster: running or not, and the last line it printed."""
    out = []
    for each in reached:
        name = container_name(cluster, each.node)
        found = each.engine.call("GET", f"/containers/{name}/json")
        if not found:
            out.append(NodeState(each.node, None))
            continue
        state = dict(found.get("State") or {})
        lines = [line for line in _logs(each.engine, name, tail=20).splitlines() if line.strip()]
        out.append(NodeState(each.node, name, str(state.get("Status", "?")),
                             None if state.get("Running") else int(state.get("ExitCode", -1)),
                             shown_line(lines[-1]) if lines else ""))
    return out


def has_nvidia(each: Reached) -> bool:
    """Whether the node's engine can give a container GPUs (the NVIDIA runtime is registered)."""
    try:
        runtimes = each.engine.info().get("Runtimes") or {}
    except EngineBuildError:
        return False
    return isinstance(runtimes, dict) and "nvidia" in runtimes


def logs(reached: list[Reached], cluster: str, tail: int) -> list[tuple[Node, list[str]]]:
    """Each node's container's last `tail` lines (at most 1 MiB read), as a message shows them."""
    out: list[tuple[Node, list[str]]] = []
    for each in reached:
        name = container_name(cluster, each.node)
        if not each.engine.call("GET", f"/containers/{name}/json"):
            out.append((each.node, []))
            continue
        text = _logs(each.engine, name, tail=tail)
        out.append((each.node, [shown_line(line, 2000) for line in text.splitlines()]))
    return out


def remaining(reached: list[Reached], cluster: str) -> int:
    return sum(len(_cluster(engine, cluster)) for engine in _engines(reached))
