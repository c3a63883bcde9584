"""Work done beside the main thread (downloads ahead, layers written at once) that never holds
up an exit for long: each task runs on a daemon thread, at most `slots` at a time. When the
build stops (an error, Ctrl-C, SIGTERM) the caller calls `cancel(wait_s)`: tasks not started
never start, and those in progress get `wait_s` seconds to end (a download stops at its next
block and removes its partial file); the process then exits without waiting further (a
temporary file left behind carries this process's id and is swept at the next start, as a
killed run's are)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


class Background:
    def __init__(self, slots: int, name: str):
        self.slots = threading.BoundedSemaphore(max(1, slots))
        self.name = name
        self.cancelled = threading.Event()
        self.threads: list[threading.Thread] = []

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

        thread = threading.Thread(target=run, name=self.name, daemon=True)
        self.threads.append(thread)
        thread.start()
        return future

    def cancel(self, wait_s: float = 0.0) -> None:
        self.cancelled.set()
        deadline = time.monotonic() + wait_s
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
