"""Pushing one tag through the Docker engine, and confirming it with the registry."""
from __future__ import annotations

import datetime as dt

from enginebuild.engine_api import EngineAPI, docker_host
from enginebuild.errors import RegistryError
from enginebuild.pushrecord import add_record
from enginebuild.reference import ImageRef
from enginebuild.registry import RegistryClient


def _stream_push(repository: str, tag: str) -> dict:
    import docker  # imported here: only pushes pay for the SDK
    from docker.errors import DockerException

    client = docker.APIClient(base_url=docker_host(), version="auto", timeout=600)
    layers: dict = {}
    digest = None
    try:
        for event in client.push(repository, tag=tag, stream=True, decode=True):
            if "error" in event:
                raise RegistryError(f"push of {repository}:{tag} failed: {event['error']}",
                                    hint="check `docker login` for this registry and that it is reachable")
            layer = event.get("id")
            status = event.get("status", "")
            if layer and status:
                entry = layers.setdefault(layer, {"status": "", "bytes": 0})
                if status in ("Pushed", "Layer already exists", "Mounted from"):
                    entry["status"] = status
                elif status.startswith("Mounted from"):
                    entry["status"] = "Layer already exists"
                total = (event.get("progressDetail") or {}).get("total")
                if total:
                    entry["bytes"] = max(entry["bytes"], int(total))
            aux = event.get("aux") or {}
            if aux.get("Digest"):
                digest = aux["Digest"]
    except DockerException as exc:
        raise RegistryError(f"push of {repository}:{tag} failed: {exc}") from None
    finally:
        client.close()
    if not digest:
        raise RegistryError(f"push of {repository}:{tag} reported no digest; nothing recorded")
    pushed = [v for v in layers.values() if v["status"] == "Pushed"]
    return {"digest": digest, "layers_pushed": len(pushed), "bytes_pushed": sum(v["bytes"] for v in pushed),
            "layers_existing": sum(1 for v in layers.values() if v["status"] != "Pushed")}


def push_tag(ws, name: str, plan, engine: EngineAPI, ref: ImageRef, tag: str) -> dict:
    engine.tag(plan.final.tag, ref.name, tag)
    result = _stream_push(ref.name, tag)
    target = ImageRef(ref.registry, ref.repository, tag, None)
    client = RegistryClient()
    confirmed = client.head_digest(target)
    if confirmed != result["digest"]:
        raise RegistryError(f"{ref.name}:{tag}: the engine reported {result['digest']} but the registry "
                            f"answers {confirmed}; nothing recorded")
    served, _ = client.manifest_digest(target)
    if served != result["digest"]:
        raise RegistryError(f"{ref.name}:{tag}: the registry serves a manifest hashing to {served}; nothing recorded")
    record = {"repository": ref.name, "tag": tag, "digest": result["digest"], "final_key": plan.final.key,
              "pushed_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
              "layers_pushed": result["layers_pushed"], "bytes_pushed": result["bytes_pushed"]}
    add_record(ws.root, name, record)
    return {**result, **record}
