"""Pushing one tag through the Docker engine, and confirming it with the registry."""
from __future__ import annotations

import datetime as dt

from enginebuild.engine_api import EngineAPI, docker_host
from enginebuild.errors import RegistryError
from enginebuild.pushrecord import add_record
from enginebuild.reference import ImageRef
from enginebuild.registry import RegistryClient


def stream_push(repository: str, tag: str) -> dict:
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
                entry = layers.setdefault(layer, {"status": ""})
                if status == "Pushed":
                    entry["status"] = "Pushed"
                elif status == "Layer already exists" or status.startswith("Mounted from"):
                    entry["status"] = "exists"
            aux = event.get("aux") or {}
            if aux.get("Digest"):
                digest = aux["Digest"]
    except DockerException as exc:
        raise RegistryError(f"push of {repository}:{tag} failed: {exc}") from None
    finally:
        client.close()
    if not digest:
        raise RegistryError(f"push of {repository}:{tag} reported no digest; nothing recorded")
    return {"digest": digest, "pushed_ids": sorted(k for k, v in layers.items() if v["status"] == "Pushed"),
            "existing_ids": sorted(k for k, v in layers.items() if v["status"] == "exists")}


def upload_size(engine: EngineAPI, image: str, manifest: dict, pushed_ids: list, manifest_bytes: int) -> tuple:
    """(layers uploaded, compressed bytes uploaded): the pushed layers as the registry stores them,
    plus the image config and the manifest, which every push uploads."""
    diff_ids = ((engine.inspect(image) or {}).get("RootFS") or {}).get("Layers") or []
    layers = manifest.get("layers") or []
    short = {d.split(":", 1)[1][:12]: i for i, d in enumerate(diff_ids)}
    sizes = [int(layers[short[p]]["size"]) for p in pushed_ids if p in short and short[p] < len(layers)]
    config = int((manifest.get("config") or {}).get("size") or 0)
    return len(sizes), sum(sizes) + config + manifest_bytes


def push_and_verify(image: str, ref: ImageRef, tag: str, engine: EngineAPI) -> dict:
    """Push IMAGE as REF:TAG; the digest must be what the registry then serves for that tag."""
    import json

    engine.tag(image, ref.name, tag)
    result = stream_push(ref.name, tag)
    target = ImageRef(ref.registry, ref.repository, tag, None)
    client = RegistryClient()
    confirmed = client.head_digest(target)
    if confirmed != result["digest"]:
        raise RegistryError(f"{ref.name}:{tag}: the engine reported {result['digest']} but the registry "
                            f"answers {confirmed}; nothing recorded")
    served, _, body = client.manifest(target)
    if served != result["digest"]:
        raise RegistryError(f"{ref.name}:{tag}: the registry serves a manifest hashing to {served}; nothing recorded")
    layers, size = upload_size(engine, image, json.loads(body), result["pushed_ids"], len(body))
    return {"digest": result["digest"], "layers_pushed": layers, "bytes_pushed": size,
            "layers_existing": len(result["existing_ids"])}


def push_tag(ws, name: str, plan, engine: EngineAPI, ref: ImageRef, tag: str) -> dict:
    result = push_and_verify(plan.final.tag, ref, tag, engine)
    record = {"repository": ref.name, "tag": tag, "digest": result["digest"], "final_key": plan.final.key,
              "pushed_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
              "layers_pushed": result["layers_pushed"], "bytes_pushed": result["bytes_pushed"]}
    add_record(ws.root, name, record)
    return {**result, **record}
