"""What an overlay patches: the files of a package the base installed, read out of the image of
the chain below (a container created, never started)."""

from __future__ import annotations

import tarfile
from typing import TYPE_CHECKING

from enginebuild.sources.trees import FileMap

if TYPE_CHECKING:
    from enginebuild.oci.engine import EngineApi


class BaseFiles(FileMap):
    """Files of an installed package, read out of the image that ships it."""

    def __init__(self, engine: EngineApi, image: str, installed: str, paths: list[str]):
        super().__init__({}, f"installed in {image} at {installed}")
        with engine.container(image) as container:
            for path in paths:
                with engine.archive(container, f"{installed.rstrip('/')}/{path}") as stream:
                    if stream is None:
                        continue
                    with tarfile.open(fileobj=stream, mode="r|") as tar:
                        for member in tar:
                            if member.isreg():
                                handle = tar.extractfile(member)
                                assert handle is not None
                                self.files[path] = (handle.read(), member.mode & 0o7777)
                            break
