"""The executor a build runs on, made from the workspace and what the build asks (its builders,
the registry cache, the secret scanner of the spec), and the engine asked first where nothing
can be reused."""

from __future__ import annotations

from enginebuild.execution.executor import Executor
from enginebuild.execution.secretscan import Scanner
from enginebuild.io.store import Store
from enginebuild.oci.engine import EngineUnavailable
from enginebuild.recipe.model import ImageSpec
from enginebuild.registrycache.cache import LayerCache
from enginebuild.usecases.buildrequest import BuildRequest
from enginebuild.usecases.targets import builders_of
from enginebuild.workspace import Workspace


def executor_for(ws: Workspace, spec: ImageSpec, request: BuildRequest, cache: LayerCache | None,
                 rebuild: bool | None = None) -> Executor:
    return Executor(ws.home, mirrors=ws.mirrors, rebuild=request.rebuild if rebuild is None else rebuild,
                    builder_name=request.buildx_builder, verbose=request.verbose, cache=cache,
                    scanner=Scanner(spec, store=Store(ws.home)), jobs=request.jobs,
                    builders=builders_of(ws, request.builder), engine=ws.engine())


def checking_executor(ws: Workspace, spec: ImageSpec) -> Executor:
    """An executor that builds nothing: what the stacks' check and the outputs' records read."""
    return Executor(ws.home, mirrors=ws.mirrors, scanner=Scanner(spec, store=Store(ws.home)), engine=ws.engine())


def engine_first(ws: Workspace, request: BuildRequest) -> None:
    """With nothing to reuse, an engine that does not answer is said before seconds of planning and checks."""
    if request.rebuild and not request.builder and request.load:
        why = ws.engine().unreachable()
        if why:
            raise EngineUnavailable(why, hint="start dockerd (see README: set-up) or set DOCKER_HOST")
