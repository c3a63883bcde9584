"""One HTTP session for every call: bounded retries that honour Retry-After.

Retried: connection resets and timeouts, 429, 502, 503, 504. Not retried: what a retry
cannot fix (other 4xx), a name that does not resolve, and a refused connection (nothing
listens there: say so at once rather than after a minute of backoff). Each retry waits
Retry-After when the server sends one (capped), otherwise an exponential backoff.
"""

from __future__ import annotations

import email.utils
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from enginebuild import __version__
from enginebuild.settings import settings

if TYPE_CHECKING:
    import requests

RETRY_STATUS = {429, 502, 503, 504}
MAX_ATTEMPTS = 6
MAX_WAIT_S = 30.0
USER_AGENT = f"enginebuild/{__version__}"


class HttpFailure(Exception):
    """The request failed after bounded retries.

    `kind` is one of: dns (the name does not resolve), refused (nothing listens),
    connection (reset or timed out, retried), status (the last answer was a retryable status).
    """

    def __init__(self, message: str, kind: str, response: requests.Response | None = None):
        super().__init__(message)
        self.kind = kind
        self.response = response

    @property
    def hint(self) -> str:
        return {
            "dns": "the host name does not resolve from here: check the name and this machine's network access",
            "refused": "nothing accepts connections there: check the host and port, and that the server runs",
            "connection": "the connection kept failing: check the network, then try again",
            "status": "the server is overloaded or failing: try again later",
        }.get(self.kind, "")


def retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _backoff(attempt: int) -> float:
    return float(min(MAX_WAIT_S, settings().http_backoff_s * (2**attempt)))


def _chain(exc: BaseException) -> str:
    seen, parts, node = 0, [], exc
    while node is not None and seen < 10:
        parts.append(f"{type(node).__name__}: {node}")
        arg = node.args[0] if node.args and isinstance(node.args[0], BaseException) else None
        node = node.__cause__ or node.__context__ or arg  # type: ignore[assignment]
        seen += 1
    return " | ".join(parts)


def classify(exc: BaseException) -> str:
    text = _chain(exc)
    if any(s in text for s in ("NameResolutionError", "Name or service not known", "No address associated",
                                "Temporary failure in name resolution", "nodename nor servname")):
        return "dns"
    if "Connection refused" in text or "ConnectionRefusedError" in text:
        return "refused"
    return "connection"


class Http:
    def __init__(self, *, attempts: int = MAX_ATTEMPTS, timeout: float = 60.0,
                 log: Callable[[str], None] | None = None):
        self._session: requests.Session | None = None
        self.unresolvable: set[str] = set()  # hosts whose name did not resolve: not asked again this run
        self.attempts = attempts
        self.timeout = timeout
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            import requests  # on first use: commands that never touch the network do not pay for it

            self._session = requests.Session()
            self._session.headers["User-Agent"] = USER_AGENT
        return self._session

    def request(self, method: str, url: str, *, body: Callable[[], Any] | None = None, attempts: int | None = None,
                **kwargs: Any) -> requests.Response:
        """`body`: a function that opens the request body, called anew for every attempt, so a
        retry never sends a handle an earlier attempt has already read (or part of) to the end."""
        import requests

        kwargs.setdefault("timeout", self.timeout)
        attempts = attempts or self.attempts
        host = urlsplit(url).hostname or ""
        if host in self.unresolvable:
            raise HttpFailure(f"{method} {_short(url)}: the name {host} does not resolve", "dns")
        last_error, kind = "no attempt made", "connection"
        response = None
        for attempt in range(attempts):
            data = body() if body is not None else kwargs.get("data")
            try:
                response = self.session.request(method, url, **{**kwargs, "data": data})
            except requests.RequestException as exc:
                kind = classify(exc)
                if kind == "dns":
                    self.unresolvable.add(host)
                    raise HttpFailure(f"{method} {_short(url)}: the name {host} does not resolve", "dns") from None
                if kind == "refused":
                    raise HttpFailure(f"{method} {_short(url)}: connection refused by {urlsplit(url).netloc}",
                                      "refused") from None
                last_error, wait = f"connection failed: {type(exc).__name__}", _backoff(attempt)
            else:
                if response.status_code not in RETRY_STATUS:
                    return response
                kind, last_error = "status", f"HTTP {response.status_code}"
                advised = retry_after(response)
                wait = min(MAX_WAIT_S, advised) if advised is not None else _backoff(attempt)
                response.close()
            finally:
                close = getattr(data, "close", None) if body is not None else None
                if close is not None:
                    close()
            if attempt + 1 < attempts:
                self.log(f"  {method} {_short(url)}: {last_error}; retrying in {wait:.1f}s "
                         f"(attempt {attempt + 2} of {attempts})")
                time.sleep(wait)
        raise HttpFailure(f"{method} {_short(url)}: {last_error} after {attempts} attempts", kind, response)


def _short(url: str) -> str:
    return url.split("?", 1)[0]
