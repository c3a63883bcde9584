"""Base images resolved per platform: the manifest digest to build on, its config's environment,
and (for images that install Python on it) the distributions it already ships."""

from __future__ import annotations

import json

from enginebuild.core.platforms import Platform
from enginebuild.errors import RegistryError
from enginebuild.lock.pins import ImagePin
from enginebuild.oci.reference import parse_image_ref
from enginebuild.oci.registry import RegistryClient
from enginebuild.oci.rootfs import is_dist_metadata, python_dist_folders, read_files


def resolve_base(client: RegistryClient, text: str, platform: str, *, read_python: bool) -> ImagePin:
    ref = parse_image_ref(text)
    try:
        digest, manifest, index_digest = client.platform_manifest(ref, platform)
    except RegistryError as exc:
        if not ref.digest or "does not resolve" not in exc.message and "refused" not in exc.message:
            raise
        # the spec pins it already; what the registry would add (config, Python distributions) is unknown here
        return ImagePin(ref.with_digest(ref.digest), ref.digest, None, note=f"pinned by the spec; its config "
                        f"could not be read here ({exc.message})")
    config_ref = ref.__class__(ref.registry, ref.repository, None, digest)
    config = json.loads(client.read_blob(config_ref, manifest["config"]["digest"]))
    body = config.get("config") or {}
    env = tuple(tuple(item.split("=", 1)) for item in body.get("Env") or [] if "=" in item)
    arch = config.get("architecture")
    wanted_arch = Platform.parse(platform).arch
    if arch and arch != wanted_arch:
        raise RegistryError(f"{text}: the image for {platform} says its architecture is {arch}")
    dists: tuple[tuple[str, str], ...] | None = None
    folders: tuple[tuple[str, str], ...] = ()
    if read_python:
        found = python_dist_folders(read_files(client, config_ref, manifest, is_dist_metadata))
        dists = tuple(sorted((name, version) for name, (version, _) in found.items()))
        folders = tuple(sorted((name, folder) for name, (_, folder) in found.items()))
    return ImagePin(ref.with_digest(digest), digest, index_digest, env, dists, dist_folders=folders)
