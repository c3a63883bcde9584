"""Work done beside the main thread (downloads ahead, layers written at once) that never holds
up an exit for long: tasks run on daemon threads, at most `slots` at a time, started in the
order they were submitted (downloads in the order the layers need them). When the
build stops (an error, Ctrl-C, SIGTERM) the caller calls `cancel(wait_s)`: tasks not started
never start, and those in progress get `wait_s` seconds to end (a download stops at its next
block and removes its partial file); the process then exits without waiting further (a
temporary file left behind carries this process's id and is swept at the next start, as a
killed run's are). A task that writes many files (a wheel unpacked into memory, a layer's tar)
calls `stop_if_cancelled()` between them: once its pool is cancelled it raises `Cancelled`, and
the task's own clean-up runs while the caller waits, instead of the process leaving with the
task half-way."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, TypeVar

from enginebuild.io import faults

T = TypeVar("T")

SLICE_S = 0.25  # how long the main thread waits on a worker before it looks at its signals again
_running = threading.local()  # the pool whose task this thread runs (none on the main thread)


class Cancelled(Exception):
    """The pool this task runs in was cancelled: the task stops where it is, cleaning up."""


def stop_if_cancelled() -> None:
    """Raise `Cancelled` in a task whose pool was cancelled (nothing elsewhere)."""
    pool = getattr(_running, "pool", None)
    if pool is not None and pool.cancelled.is_set():
        raise Cancelled(f"{pool.name}: the run was cancelled")


def settled(future: Future[T]) -> T:
    """The future's result, waited for in short slices. CPython runs signal handlers in the main
    thread only, and a lock wait without a timeout there is not interrupted by a signal the
    kernel handed to another thread: waiting in slices, Ctrl-C and SIGTERM stop the run whichever
    thread received them."""
    while not future.done():
        wait([future], timeout=SLICE_S)
    return future.result()


def completed(futures: Iterable[Future[T]]) -> Iterator[Future[T]]:
    """The futures as each completes (as `as_completed`), waited for in slices as `settled` does."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=SLICE_S, return_when=FIRST_COMPLETED)
        yield from done


class Background:
    """Tasks run on at most `slots` daemon threads, started in the order they were submitted."""

    def __init__(self, slots: int, name: str):
        self.slots = max(1, slots)
        self.name = name
        self.cancelled = threading.Event()
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.queue: deque[tuple[Future[Any], Callable[[], Any]]] = deque()
        self.working = 0  # workers taking tasks from the queue

    def submit(self, task: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self.lock:
            self.queue.append((future, task))
            if self.working < self.slots:
                self.working += 1
                thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                faults.reached("background.start", self.name)
                # listed once started: a signal in start() (it waits for the new thread to run) leaves
                # a thread `cancel` could not join; unlisted, it finds the run cancelled as it starts
                thread.start()
                self.threads.append(thread)
        return future

    def _work(self) -> None:
        _running.pool = self
        while True:
            with self.lock:
                if not self.queue or self.cancelled.is_set():
                    self.working -= 1
                    return
                future, task = self.queue.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(task())
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)

    def cancel(self, wait_s: float = 0.0) -> None:
        self.cancelled.set()
        with self.lock:
            for future, _ in self.queue:  # never started
                future.cancel()
            self.queue.clear()
        deadline = time.monotonic() + wait_s
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
