"""The sweeps' lease: which replica runs the sweeps (catch-up, feed polls, the club's tick).

With several replicas on one database, one holds the `sweeps` lease, renewed every ttl/3 by a
thread of its own. `under(what, sweep)` runs a sweep with a `FencedStore` that refuses its
writes once the lease's epoch has passed to someone else; on another replica it does nothing.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable

from store.errors import LeaseLost, StoreError
from store.lease import FencedStore, Lease

if TYPE_CHECKING:
    from store import Store

    from .deps import Clock

log = logging.getLogger("paperclub.daily")

SWEEP_LEASE = "sweeps"  # the lease row the sweeps run under, one holder across replicas
LEASE_SECONDS = 15.0  # a dead holder's sweeps pass on after at most this


class SweepLease:
    """This replica's hold on the sweeps' lease; `on_gain()` runs each time it takes the lease over."""

    def __init__(self, store: Store, replica: str, clock: Clock, *, ttl: float = LEASE_SECONDS,
                 on_gain: Callable[[], None] = lambda: None):
        self.store, self.replica, self.clock, self.ttl = store, replica, clock, ttl
        self.on_gain = on_gain
        self._lease: Lease | None = None
        self._lock = threading.Lock()
        self._keeper: threading.Thread | None = None
        self._stop = threading.Event()
        self.handovers: list[tuple[int, float]] = []  # (epoch, when) each time this replica took the lease

    def start(self) -> None:
        """Take the lease now if it is free, then renew it (or wait for it) every ttl/3."""
        self.renew()
        self._keeper = threading.Thread(target=self._keep, name="lease", daemon=True)
        self._keeper.start()

    def _keep(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            self.renew()

    def renew(self) -> Lease | None:
        """Take or renew the lease; on taking it over, call on_gain()."""
        now = self.clock().timestamp()
        try:
            epoch = self.store.acquire_lease(SWEEP_LEASE, holder=self.replica, ttl=self.ttl, now=now)
        except StoreError as e:  # the database is away: sweep nothing until it is back
            log.warning("could not renew the %s lease: %s", SWEEP_LEASE, e)
            epoch = None
        with self._lock:
            previous = self._lease
            self._lease = Lease(SWEEP_LEASE, self.replica, epoch, self.ttl) if epoch else None
            lease = self._lease
        if lease is not None and (previous is None or previous.epoch != lease.epoch):
            self.handovers.append((lease.epoch, now))
            log.info("replica %s holds the %s lease (epoch %d): the sweeps run here", self.replica,
                     SWEEP_LEASE, lease.epoch)
            self.on_gain()
        elif previous is not None and lease is None:
            log.warning("replica %s no longer holds the %s lease", self.replica, SWEEP_LEASE)
        return lease

    @property
    def held(self) -> Lease | None:
        """The lease as this replica last took or renewed it (None: another replica's)."""
        return self._lease

    def release(self) -> bool:
        """Stop renewing and hand the lease over at once (a clean shutdown); True if it was ours."""
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join(5)
        with self._lock:
            lease, self._lease = self._lease, None
        if lease is None:
            return False
        try:
            released = self.store.release_lease(lease.name, holder=lease.holder, epoch=lease.epoch)
        except StoreError as e:
            log.warning("could not release the %s lease (it expires by itself): %s", lease.name, e)
            return False
        if released:
            log.info("released the %s lease (epoch %d)", lease.name, lease.epoch)
        return released

    def under(self, what: str, sweep: Callable[[Store], object], empty):
        """Run `sweep` with a store fenced by the lease, if this replica holds it; else `empty`."""
        lease = self.renew() if self._keeper is None else self._lease  # not started: tests, `pick`
        if lease is None:
            log.debug("%s: the %s lease is another replica's", what, SWEEP_LEASE)
            return empty
        fenced = FencedStore(self.store, lease, lambda: self.clock().timestamp())
        try:
            return sweep(fenced)
        except LeaseLost as e:
            log.warning("%s stopped: %s; the new holder carries on", what, e)
            return empty
