"""SIGTERM behaves like Ctrl-C: the work in progress is cancelled, children stopped,
temporary files removed, a clear line printed, and the process exits 143 (130 for SIGINT).

The handler raises `Terminated` in the main thread, so every `finally` and context
manager on the way out runs, as it does for KeyboardInterrupt.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


class Terminated(BaseException):
    """SIGTERM arrived."""


def _on_term(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one cancellation; a second TERM must not interrupt cleanup
    raise Terminated()


def install() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_term)
        # Ctrl-C raises KeyboardInterrupt even when this process was started with SIGINT
        # ignored (from a background job); a handler, unlike an ignored signal, is reset on
        # exec, so the builders we start can be cancelled with SIGINT too
        signal.signal(signal.SIGINT, signal.default_int_handler)
