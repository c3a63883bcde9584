"""What `image` asks of a build beyond the image and its plan options (`BuildRequest`), and what
one platform's build reports (`Built`): the values the verb parses its arguments into and the
build use cases (building.py, componentbuild.py, pushing.py's remake) read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

OutputFolders = tuple[Path | None, dict[str, Path]]  # --output: the runtime's folder, each component's


@dataclass(frozen=True)
class BuildRequest:
    """What a build is asked for beyond the image and its plan options."""

    platform: list[str] = field(default_factory=list)  # only these platforms (default: the spec's)
    builder: list[str] = field(default_factory=list)  # --builder values (default: enginebuild.yaml, else here)
    buildx_builder: str | None = None
    verbose: bool = False
    jobs: int | None = None
    cache: str | None = None
    no_cache: bool = False  # no registry cache
    rebuild: bool = False  # --no-cache: nothing reused but downloads
    cache_readonly: bool = False
    outputs: OutputFolders | None = None  # parsed --output: (runtime folder, {component: folder})
    component: list[str] = field(default_factory=list)  # build only these components (and their needs)
    push: bool = False
    to: str | None = None
    tag: list[str] = field(default_factory=list)  # tags to push
    local_tags: list[str] = field(default_factory=list)  # -t NAME[:TAG] (`{image}`: the image's name)
    tags_follow: bool = False  # the local tags are enginebuild.yaml's defaults: later builds move them too
    load: bool = True  # False (--no-load): the image is not loaded into the engine
    locked: bool = False  # --locked/--frozen: what the build learns may not change the routes file


@dataclass(frozen=True)
class Built:
    """One platform of an image built (or, with `components`, those components only): what was
    done, in words, how long it took, and what it answers to (a tag, or the image ID of an image
    not loaded; the registry cache that has the components' outputs)."""

    name: str
    platform: str
    done: tuple[str, ...]
    seconds: float
    result: str
    components: tuple[str, ...] = ()


def ignore(_: Built) -> None:
    """A build's report nobody reads."""
