"""The one client of the Docker Engine API (builds go through the docker CLI: see execution/buildkit.py;
the no-op fast path asks its one question through oci/probe.py, standard library only).

Standard library only (http.client over the engine's socket): it answers the questions
asked on every run in milliseconds, streams images in (`load`) and out (`save`), reads
files out of images (`create` + `archive`) and pulls bases. One error mapping: an engine
that does not answer is `EngineUnavailable`; an error it reports is `EngineError`.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Protocol
from urllib.parse import quote, urlencode

from enginebuild.errors import EngineBuildError, UserError
from enginebuild.oci.endpoint import Endpoint, local_endpoint
from enginebuild.oci.output import LOG_CONFIG, Output, describe_limit, read_output
from enginebuild.settings import ENGINE_API_VERSION
from enginebuild.wire import JsonDoc, loads


class EngineUnavailable(EngineBuildError):
    pass


class EngineError(EngineBuildError):
    pass


class EngineApi(Protocol):
    """What a build asks of a Docker engine: `Engine` speaks it to a real one over its API; the tests
    of the build loop in process give one in memory (tests/helpers/memengine.py)."""

    endpoint: Endpoint

    def ping(self) -> bool: ...
    def unreachable(self) -> str | None: ...
    def info(self) -> JsonDoc: ...
    def inspect(self, ref: str) -> JsonDoc | None: ...
    def image_id(self, ref: str) -> str | None: ...
    def tags_of(self, repository: str) -> set[str]: ...
    def tag(self, source: str, repository: str, tag: str) -> None: ...
    def remove(self, ref: str, force: bool = False) -> None: ...
    def load(self, chunks: Iterable[bytes | memoryview], size: int) -> list[str]: ...
    def save(self, ref: str) -> contextlib.AbstractContextManager[IO[bytes]]: ...
    def pull(self, ref: str, credentials: tuple[str, str] | None = None) -> None: ...
    def run(self, image: str, argv: list[str], env: dict[str, str], timeout: float = 3600) -> tuple[int, bytes, bytes]: ...
    def run_limited(self, image: str, argv: list[str], env: dict[str, str], limit_s: float,
                    gpus: bool = False) -> tuple[int | None, bytes, bytes]: ...
    def run_with_files(self, image: str, argv: list[str], limit_s: float, put: Path, take: str,
                       receive: Callable[[IO[bytes]], None]) -> tuple[int | None, bytes, bytes]: ...
    def container(self, image: str) -> contextlib.AbstractContextManager[str]: ...
    def archive(self, container: str, path: str) -> contextlib.AbstractContextManager[IO[bytes] | None]: ...


def holds(engine: EngineApi) -> Callable[[str, str], bool]:
    """Whether the engine holds an image (by ID) under a tag, as the one decision of `image` asks it
    (state/decision.py); an engine that does not answer holds nothing."""

    def held(tag: str, ident: str) -> bool:
        try:
            return engine.image_id(tag) == ident
        except EngineBuildError:
            return False
    return held


class Engine:
    def __init__(self, host: str | Endpoint | None = None, timeout: float = 120.0):
        if isinstance(host, Endpoint):
            self.endpoint = host
        else:
            self.endpoint = Endpoint(host) if host else local_endpoint()
        self.host = self.endpoint.host
        self.timeout = timeout

    def _connection(self, timeout: float | None = None) -> http.client.HTTPConnection:
        try:
            return self.endpoint.connection(timeout if timeout is not None else self.timeout)
        except UserError as exc:
            raise EngineUnavailable(exc.message) from None

    def _unavailable(self, exc: BaseException) -> EngineUnavailable:
        if isinstance(exc, ssl.SSLError):  # TLS refused: said as such, not as an engine that is down
            return EngineUnavailable(f"cannot reach the Docker engine at {self.host}: TLS: {exc}",
                                     hint="check DOCKER_CERT_PATH's ca.pem, cert.pem and key.pem against the "
                                          "engine's (`docker --tlsverify -H ADDRESS version` tells)")
        return EngineUnavailable(f"cannot reach the Docker engine at {self.host}: {exc}",
                                 hint="start dockerd (see README: set-up) or set DOCKER_HOST")

    @contextlib.contextmanager
    def open(self, method: str, path: str, params: dict[str, str] | None = None, *, body: Any = None,
             headers: dict[str, str] | None = None, timeout: float | None = None,
             ok: tuple[int, ...] = (200, 201, 204)) -> Iterator[http.client.HTTPResponse]:
        """A raw response, for streaming; a status outside `ok` (and not 404) raises EngineError."""
        url = f"/{ENGINE_API_VERSION}{path}" + ("?" + urlencode(params) if params else "")
        conn = self._connection(timeout)
        try:
            try:
                chunked = (headers or {}).get("Transfer-Encoding") == "chunked"
                conn.request(method, url, body=body, headers=headers or {}, encode_chunked=chunked)
                response = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                raise self._unavailable(exc) from None
            if response.status not in ok and response.status != 404:
                raise EngineError(f"Docker engine: {method} {path} failed ({response.status}): {_message(response)}")
            yield response
        finally:
            conn.close()

    def call(self, method: str, path: str, params: dict[str, str] | None = None, *, body: Any = None,
             headers: dict[str, str] | None = None) -> Any:
        """The decoded JSON answer, or None for 404 and empty answers."""
        with self.open(method, path, params, body=body, headers=headers) as response:
            try:
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                raise self._unavailable(exc) from None
            if response.status == 404:
                return None
        return loads(data) if data.strip() else None

    # -- images ----------------------------------------------------------------------------
    def ping(self) -> bool:
        return self.unreachable() is None

    def unreachable(self) -> str | None:
        """Why the engine does not answer `/_ping` (its connection's own words: refused, a TLS
        certificate not verified, a client certificate missing), or None when it answers."""
        try:
            with self.open("GET", "/_ping", timeout=5) as response:
                return None if response.status == 200 else f"/_ping answered HTTP {response.status}"
        except EngineBuildError as exc:
            return exc.message

    def version(self) -> JsonDoc:
        return dict(self.call("GET", "/version") or {})

    def info(self) -> JsonDoc:
        return dict(self.call("GET", "/info") or {})

    def inspect(self, ref: str) -> JsonDoc | None:
        found = self.call("GET", f"/images/{quote(ref, safe='')}/json")
        return dict(found) if found else None

    def image_id(self, ref: str) -> str | None:
        found = self.inspect(ref)
        return str(found["Id"]) if found else None

    def history(self, ref: str) -> list[JsonDoc]:
        return list(self.call("GET", f"/images/{quote(ref, safe='')}/history") or [])

    def tags_of(self, repository: str) -> set[str]:
        """Every tag of a repository present in the engine, in one call."""
        images = self.call("GET", "/images/json", {"filters": json.dumps({"reference": [f"{repository}:*"]})}) or []
        tags = set()
        for image in images:
            for ref in image.get("RepoTags") or []:
                repo, _, tag = ref.rpartition(":")
                if repo == repository:
                    tags.add(tag)
        return tags

    def tag(self, source: str, repository: str, tag: str) -> None:
        self.call("POST", f"/images/{quote(source, safe='')}/tag", {"repo": repository, "tag": tag})

    def remove(self, ref: str, force: bool = False) -> None:
        with self.open("DELETE", f"/images/{quote(ref, safe='')}", {"force": "1" if force else "0"},
                       ok=(200, 409)) as response:
            response.read()

    def load(self, chunks: Iterable[bytes | memoryview], size: int) -> list[str]:
        """Load a docker-archive of `size` bytes sent as `chunks` (layers the engine already has
        may be left out)."""
        loaded = []
        with self.open("POST", "/images/load", {"quiet": "1"}, body=chunks, timeout=3600,
                       headers={"Content-Type": "application/x-tar", "Content-Length": str(size)}) as response:
            for line in response.read().decode("utf-8", "replace").splitlines():
                try:
                    event = loads(line)
                except ValueError:
                    continue
                if "error" in event or "errorDetail" in event:
                    raise EngineError(f"the engine refused the image: {event.get('error') or event.get('errorDetail')}")
                text = str(event.get("stream", ""))
                if "Loaded image" in text:
                    loaded.append(text.strip())
        return loaded

    @contextlib.contextmanager
    def save(self, ref: str) -> Iterator[IO[bytes]]:
        """A stream of `docker save REF` (docker-archive: every layer, then manifest.json)."""
        with self.open("GET", f"/images/{quote(ref, safe='')}/get", timeout=3600) as response:
            if response.status == 404:
                raise EngineError(f"no image {ref} in the engine")
            yield response

    def pull(self, ref: str, credentials: tuple[str, str] | None = None) -> None:
        image, _, digest = ref.partition("@")
        params = {"fromImage": image, "tag": digest} if digest else {"fromImage": ref}
        headers = {}
        if credentials:
            auth = {"username": credentials[0], "password": credentials[1]}
            headers["X-Registry-Auth"] = base64.urlsafe_b64encode(json.dumps(auth).encode()).decode()
        with self.open("POST", "/images/create", params, headers=headers, timeout=3600) as response:
            for line in response.read().decode("utf-8", "replace").splitlines():
                try:
                    event = loads(line)
                except ValueError:
                    continue
                if "error" in event:
                    raise EngineError(f"pulling {ref}: {event['error']}")
            if response.status == 404:
                raise EngineError(f"pulling {ref}: not found")

    # -- reading files out of an image -----------------------------------------------------
    @contextlib.contextmanager
    def container(self, image: str) -> Iterator[str]:
        """A created (never started) container of an image, removed afterwards."""
        body = json.dumps({"Image": image, "Cmd": ["/enginebuild-never-runs"], "Entrypoint": None}).encode()
        created = self.call("POST", "/containers/create", body=body, headers={"Content-Type": "application/json"})
        if not created:
            raise EngineError(f"cannot create a container of {image}")
        ident = str(created["Id"])
        try:
            yield ident
        finally:
            with contextlib.suppress(EngineBuildError):
                self.call("DELETE", f"/containers/{ident}", {"force": "1", "v": "1"})

    def run(self, image: str, argv: list[str], env: dict[str, str], timeout: float = 3600) -> tuple[int, bytes, bytes]:
        """Run a command in a container of an image, without a network: (exit status, stdout,
        stderr). The container is removed afterwards."""
        status, out, err = self.run_limited(image, argv, env, timeout)
        if status is None:
            raise EngineError(f"{argv[0]} in a container of {image} ran past {timeout:.0f}s; stopped")
        return status, out, err

    def run_limited(self, image: str, argv: list[str], env: dict[str, str], limit_s: float,
                    gpus: bool = False) -> tuple[int | None, bytes, bytes]:
        """As `run`, stopped after `limit_s` seconds (status None: it ran past them, the output is
        what it printed until then); `gpus`: every GPU of the NVIDIA runtime given to it. What it
        prints is read as it prints it, up to OUTPUT_LIMIT bytes: past that it is stopped and
        `PrintedTooMuch` raised."""
        ident = self._created(image, argv, env, gpus=gpus)
        try:
            return self._started(ident, image, argv, limit_s)
        finally:
            with contextlib.suppress(EngineBuildError):
                self.call("DELETE", f"/containers/{ident}", {"force": "1", "v": "1"})

    def run_with_files(self, image: str, argv: list[str], limit_s: float, put: Path, take: str,
                       receive: Callable[[IO[bytes]], None]) -> tuple[int | None, bytes, bytes]:
        """As `run_limited`, as root and with the image's own variables only: the tar file `put`
        unpacked at / before it starts; once it ended with status 0, `receive` reads a tar stream of
        the folder `take` (its entries start at the folder's base name)."""
        ident = self._created(image, argv, {}, user="0")
        try:
            with open(put, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                with self.open("PUT", f"/containers/{ident}/archive", {"path": "/"}, body=handle, timeout=3600,
                               headers={"Content-Type": "application/x-tar",
                                        "Content-Length": str(size)}) as response:
                    response.read()
                    if response.status == 404:
                        raise EngineError(f"cannot copy files into a container of {image}")
            status, out, err = self._started(ident, image, argv, limit_s)
            if status == 0:
                with self.archive(ident, take) as stream:
                    if stream is None:
                        raise EngineError(f"{argv[0]} in a container of {image} left no {take}")
                    receive(stream)
            return status, out, err
        finally:
            with contextlib.suppress(EngineBuildError):
                self.call("DELETE", f"/containers/{ident}", {"force": "1", "v": "1"})

    def _created(self, image: str, argv: list[str], env: dict[str, str], gpus: bool = False, user: str = "") -> str:
        """A container of `image` running `argv` without a network (not started yet)."""
        host: JsonDoc = {"NetworkMode": "none", "LogConfig": LOG_CONFIG}
        if gpus:
            host["DeviceRequests"] = [{"Driver": "nvidia", "Count": -1, "Capabilities": [["gpu"]]}]
        body: JsonDoc = {"Image": image, "Entrypoint": argv[:1], "Cmd": argv[1:], "WorkingDir": "/",
                         "Env": [f"{k}={v}" for k, v in env.items()], "NetworkDisabled": True, "HostConfig": host}
        if user:
            body["User"] = user
        created = self.call("POST", "/containers/create", body=json.dumps(body).encode(),
                            headers={"Content-Type": "application/json"})
        if not created:
            raise EngineError(f"cannot create a container of {image}")
        return str(created["Id"])

    def _started(self, ident: str, image: str, argv: list[str], limit_s: float) -> tuple[int | None, bytes, bytes]:
        """Start a created container and read what it prints until it ends (see `run_limited`)."""
        self.call("POST", f"/containers/{ident}/start")
        reader = _Follower(self, ident, limit_s)
        reader.start()
        status = self._ended(ident, limit_s, stop=reader.over)
        if status is None or reader.over():
            with contextlib.suppress(EngineBuildError):
                self.call("POST", f"/containers/{ident}/kill")
        printed = reader.result()
        if printed.over:
            raise PrintedTooMuch(f"{argv[0]} in a container of {image} printed more than "
                                 f"{describe_limit()}; stopped")
        return status, printed.out, printed.err

    def logs(self, ident: str, tail: int | None = None) -> Output:
        """What a container printed from its start, or its last `tail` lines: at most OUTPUT_LIMIT bytes."""
        params = {"stdout": "1", "stderr": "1", **({"tail": str(tail)} if tail else {})}
        with self.open("GET", f"/containers/{ident}/logs", params, timeout=60) as response:
            return read_output(response)

    def _ended(self, ident: str, limit_s: float, stop: Callable[[], bool] = lambda: False) -> int | None:
        """The container's exit status once it stops, None when it still runs after `limit_s` or
        `stop()` says so (asked every tenth of a second: a wait the engine holds would outlive its
        caller's limit)."""
        deadline = time.monotonic() + limit_s
        while True:
            state = (self.call("GET", f"/containers/{ident}/json") or {}).get("State") or {}
            if not state.get("Running") and state.get("Status") in ("exited", "dead"):
                return int(state.get("ExitCode", -1))
            if time.monotonic() >= deadline or stop():
                return None
            time.sleep(0.1)

    @contextlib.contextmanager
    def archive(self, container: str, path: str) -> Iterator[IO[bytes] | None]:
        """A tar stream of `path` in a container (its entries start at the path's base name), or None."""
        with self.open("GET", f"/containers/{container}/archive", {"path": path}, timeout=3600) as response:
            yield None if response.status == 404 else response


class PrintedTooMuch(EngineError):
    """A container printed more than OUTPUT_LIMIT bytes and was stopped."""


class _Follower(threading.Thread):
    """Reads a running container's output as it prints it (the engine's follow stream, from its
    start), no further than OUTPUT_LIMIT bytes."""

    def __init__(self, engine: Engine, ident: str, limit_s: float) -> None:
        super().__init__(name="enginebuild-container-output", daemon=True)
        self.engine, self.container, self.limit_s = engine, ident, limit_s
        self._output: Output | None = None
        self._error: EngineBuildError | None = None
        self._done = threading.Event()

    def run(self) -> None:
        try:
            params = {"stdout": "1", "stderr": "1", "follow": "1"}
            with self.engine.open("GET", f"/containers/{self.container}/logs", params,
                                  timeout=self.limit_s + 60) as response:
                self._output = read_output(response)
        except EngineBuildError as exc:
            self._error = exc
        except OSError as exc:  # the stream broke off (the container was removed under it)
            self._error = EngineError(f"reading a container's output: {exc}")
        finally:
            self._done.set()

    def over(self) -> bool:
        return self._output is not None and self._output.over

    def result(self) -> Output:
        self._done.wait(60)
        if self._output is None:
            raise self._error or EngineError("a container's output could not be read within 60 s of its end")
        return self._output


def _message(response: http.client.HTTPResponse) -> str:
    body = response.read()
    try:
        return str(loads(body).get("message", ""))
    except ValueError:
        return body[:200].decode("utf-8", "replace")
