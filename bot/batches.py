"""A bounded queue with one worker thread that takes what is waiting in batches: work that must not
wait in line with the commands' pool (link unfurls, bot/unfurl.py)."""
from __future__ import annotations

import logging
import queue
import threading
from typing import Callable, Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class BatchQueue(Generic[T]):
    """`offer(item)` queues an item for `run(batch)` on the queue's own worker, up to `batch` at a time.

    Past `bound` waiting items, offer() refuses (False) and counts it in `dropped`.
    `threaded=False` (tests, the console) runs each item in the caller, as `later` runs work there.
    """

    def __init__(self, run: Callable[[list[T]], None], *, name: str, threaded: bool = True, bound: int = 40,
                 batch: int = 20):
        self.run, self.name, self.threaded, self.batch = run, name, threaded, batch
        self._waiting: queue.Queue[T] = queue.Queue(maxsize=bound)
        self._worker: threading.Thread | None = None
        self._start = threading.Lock()
        self.dropped = 0

    @property
    def bound(self) -> int:
        return self._waiting.maxsize

    def offer(self, item: T) -> bool:
        """Queue one item; False (and never run) when the queue is full."""
        if not self.threaded:
            self.run([item])
            return True
        try:
            self._waiting.put_nowait(item)
        except queue.Full:
            self.dropped += 1
            return False
        with self._start:
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name=self.name, daemon=True)
                self._worker.start()
        return True

    def join(self) -> None:
        """Wait until every queued item is done (or given up on)."""
        self._waiting.join()

    def _work(self) -> None:
        while True:
            batch = [self._waiting.get()]
            while len(batch) < self.batch:
                try:
                    batch.append(self._waiting.get_nowait())
                except queue.Empty:
                    break
            try:
                self.run(batch)
            except Exception:  # the worker outlives any one batch
                log.exception("%s: %d items failed", self.name, len(batch))
            finally:
                for _ in batch:
                    self._waiting.task_done()
