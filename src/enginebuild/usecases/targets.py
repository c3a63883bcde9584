"""What a run is asked to build: the platforms of a spec, a local tag, the builders named. Light on imports: every verb
that names an image uses it, most of them without building anything."""

from __future__ import annotations

import re

from enginebuild.core.platforms import platform_hint
from enginebuild.errors import UserError
from enginebuild.execution.sites import BuilderSpec, builder_specs
from enginebuild.oci.reference import ImageRef, parse_destination, parse_image_ref
from enginebuild.recipe.model import ImageSpec
from enginebuild.recipe.repo_settings import load_repo_settings
from enginebuild.workspace import Workspace

TAG_PATTERN = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"


def destination(to: str, tags: list[str]) -> tuple[ImageRef, list[str]]:
    """`--to REGISTRY/REPO[:TAG]` and `--tag`s: the repository pushed to and every tag asked, each
    a valid tag."""
    ref, explicit = parse_destination(to)
    tags = list(tags) + ([explicit] if explicit else [])
    for tag in tags:
        if not re.fullmatch(TAG_PATTERN, tag):
            raise UserError(f"--tag {tag!r}: a tag is 1-128 of A-Z a-z 0-9 _ . - (not starting with . or -)")
    return ref, tags


def parse_local_tag(value: str) -> tuple[str, str]:
    """`-t NAME[:TAG]` as (repository, tag), as Docker reads it (tag default `latest`)."""
    try:
        ref = parse_image_ref(value)
    except ValueError as exc:
        raise UserError(f"-t {value!r}: {exc}") from None
    if ref.digest:
        raise UserError(f"-t {value!r}: a local tag names NAME[:TAG], not a digest")
    name = value.rsplit(":", 1)[0] if ref.tag and value.endswith(f":{ref.tag}") else value
    component = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    if not re.fullmatch(rf"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{component}(?:/{component})*", name):
        raise UserError(f"-t {value!r}: not a Docker image name (lower-case components, as `docker build -t` needs)")
    return name, ref.tag or "latest"


def platforms_of(spec: ImageSpec, wanted: list[str]) -> list[str]:
    for platform in wanted:
        if platform not in spec.platforms:
            raise UserError(f"{spec.file}: {spec.name} is built for {', '.join(spec.platforms)}, not {platform}",
                            hint=platform_hint(platform))
    return list(wanted) or list(spec.platforms)


def builders_of(ws: Workspace, values: list[str]) -> list[BuilderSpec]:
    return builder_specs(values, load_repo_settings(ws.root).builders)


def pinned_ref(text: str, why: str) -> ImageRef:
    """REGISTRY/REPO@sha256:... as given; refused naming `why` when it is a tag (a tag can move)."""
    try:
        ref = parse_image_ref(text)
    except ValueError as exc:
        raise UserError(f"{text}: {exc}") from None
    if not ref.digest:
        raise UserError(f"{text}: {why} (a tag can move)",
                        hint="give REGISTRY/REPO@sha256:... (push prints it, lockfiles/IMAGE.pushes.json keeps it)")
    return ref
