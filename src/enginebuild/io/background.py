"""Work done beside the main thread (downloads ahead, layers written at once) that never holds
up an exit: each task runs on a daemon thread, at most `slots` at a time. When the build stops
(an error, Ctrl-C, SIGTERM) the caller calls `cancel()` and goes: tasks not started never start,
and the process exits without waiting for one in progress (a temporary file it leaves carries
this process's id and is swept at the next start, as a killed run's are)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


class Background:
    def __init__(self, slots: int, name: str):
        self.slots = threading.BoundedSemaphore(max(1, slots))
        self.name = name
        self.cancelled = threading.Event()

    def submit(self, task: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()

        def run() -> None:
            with self.slots:
                if self.cancelled.is_set() or not future.set_running_or_notify_cancel():
                    return
                try:
                    future.set_result(task())
                except BaseException as exc:  # handed to whoever waits on the future
                    future.set_exception(exc)

        threading.Thread(target=run, name=self.name, daemon=True).start()
        return future

    def cancel(self) -> None:
        self.cancelled.set()
