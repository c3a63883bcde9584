"""One HTTP session for every call: bounded retries that honour Retry-After.

Retried: connection errors and resets, 429, 502, 503, 504. Not retried: anything a
retry cannot fix (4xx other than 429). Each retry waits Retry-After when the server
sends one (capped), otherwise an exponential backoff.
"""
from __future__ import annotations

import email.utils
import os
import sys
import time
from urllib.parse import urlsplit

from enginebuild import __version__

RETRY_STATUS = {429, 502, 503, 504}
MAX_ATTEMPTS = 6
MAX_WAIT_S = 30.0
USER_AGENT = f"enginebuild/{__version__}"


class HttpFailure(Exception):
    """The request failed after bounded retries; `response` is the last one, if any."""

    def __init__(self, message: str, response=None):
        super().__init__(message)
        self.response = response


def _retry_after(response) -> float | None:
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
    base = float(os.environ.get("ENGINEBUILD_HTTP_BACKOFF", "0.5"))
    return min(MAX_WAIT_S, base * (2 ** attempt))


class Http:
    def __init__(self, *, attempts: int = MAX_ATTEMPTS, timeout: float = 60.0, log=None):
        self._session = None
        self.unresolvable: set = set()  # hosts whose name did not resolve: not asked again this run
        self.attempts = attempts
        self.timeout = timeout
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.waited_s = 0.0

    @property
    def session(self):
        if self._session is None:
            import requests  # imported on first use: commands that never touch the network do not pay for it

            self._requests = requests
            self._session = requests.Session()
            self._session.headers["User-Agent"] = USER_AGENT
        return self._session

    def request(self, method: str, url: str, **kwargs):
        kwargs.setdefault("timeout", self.timeout)
        last_error = "no attempt made"
        response = None
        host = urlsplit(url).hostname or ""
        if host in self.unresolvable:
            raise HttpFailure(f"{method} {_short(url)}: the name {host} does not resolve (not retried)")
        for attempt in range(self.attempts):
            session = self.session
            try:
                response = session.request(method, url, **kwargs)
            except self._requests.RequestException as exc:
                if _name_not_resolved(exc):
                    self.unresolvable.add(host)
                    raise HttpFailure(f"{method} {_short(url)}: the name {host} does not resolve "
                                      "(no network access to it from here?)") from None
                last_error = f"connection failed: {type(exc).__name__}"
                wait = _backoff(attempt)
            else:
                if response.status_code not in RETRY_STATUS:
                    return response
                last_error = f"HTTP {response.status_code}"
                advised = _retry_after(response)
                wait = min(MAX_WAIT_S, advised) if advised is not None else _backoff(attempt)
                response.close()
            if attempt + 1 < self.attempts:
                self.log(f"  {method} {_short(url)}: {last_error}; retrying in {wait:.1f}s "
                         f"(attempt {attempt + 2} of {self.attempts})")
                time.sleep(wait)
                self.waited_s += wait
        raise HttpFailure(f"{method} {_short(url)}: {last_error} after {self.attempts} attempts", response)


def _name_not_resolved(exc: BaseException) -> bool:
    """A DNS failure, which a retry seconds later will not mend."""
    seen = 0
    while exc is not None and seen < 10:
        text = f"{type(exc).__name__}: {exc}"
        if "NameResolutionError" in text or "Name or service not known" in text or "Temporary failure in name resolution" in text \
                or "No address associated with hostname" in text or "nodename nor servname" in text:
            return True
        exc = exc.__cause__ or exc.__context__ or (exc.args[0] if exc.args and isinstance(exc.args[0], BaseException) else None)
        seen += 1
    return False


def _short(url: str) -> str:
    return url.split("?", 1)[0]
